package refresh_test

import (
	"fmt"
	"sort"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// renderedConfig is a rendered MachineConfig as the MCO daemon compares them.
func renderedConfig(name, ignition string) *mcfgv1.MachineConfig {
	return &mcfgv1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mcfgv1.MachineConfigSpec{
			OSImageURL: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:aaa",
			Config:     runtime.RawExtension{Raw: []byte(ignition)},
		},
	}
}

// The MCO daemon's question: may a node go from one rendered config to the next without a
// reboot? Here the new config changes the cluster pull secret, which the default policies apply
// in place with no action, and a Chrony file, which no policy names.
func ExampleDecideMachineConfigs() {
	current := renderedConfig("rendered-worker-1", `{"ignition":{"version":"3.5.0"},"storage":{"files":[
		{"path":"/var/lib/kubelet/config.json","contents":{"source":"data:,%7B%7D"}}]}}`)
	next := renderedConfig("rendered-worker-2", `{"ignition":{"version":"3.4.0"},"storage":{"files":[
		{"path":"/var/lib/kubelet/config.json","contents":{"source":"data:,%7B%22auths%22%3A%7B%7D%7D"}}]}}`)
	res, err := refresh.DecideMachineConfigs(current, next, refresh.DefaultPolicies())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome, res.Changes[0].Rule)

	next.Spec.Config.Raw = []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[
		{"path":"/var/lib/kubelet/config.json","contents":{"source":"data:,%7B%7D"}},
		{"path":"/etc/chrony.conf","contents":{"source":"data:,pool%20ntp.example.com"}}]}}`)
	res, _ = refresh.DecideMachineConfigs(current, next, refresh.DefaultPolicies())
	fmt.Println(res.Outcome, res.Changes[0].Rule)

	// Spec 3.6 and later are refused, as the MCO refuses them.
	next.Spec.Config.Raw = []byte(`{"ignition":{"version":"3.6.0"}}`)
	_, err = refresh.DecideMachineConfigs(current, next, refresh.DefaultPolicies())
	fmt.Println(err)
	// Output:
	// InPlace file policy /var/lib/kubelet/config.json: None
	// Reboot no file policy matches /etc/chrony.conf
	// new config: MachineConfig "rendered-worker-2" spec.config: unsupported Ignition version "3.6.0": only spec 3.0.0 to 3.5.0 can be read, as in the MCO
}

// HyperShift's in-place upgrader hands a pool's nodes the served Ignition config, its hash and
// the paths that may change without a reboot, derived from the node disruption policies.
func ExampleBuildUpgradeConfigMap() {
	payload := []byte(`{"ignition":{"version":"3.5.0"}}`)
	paths := refresh.NoRebootPathsFromPolicies(refresh.DefaultPolicies())
	cm, err := refresh.BuildUpgradeConfigMap("workers-a1b2", payload, "4c8e0f1a", paths)
	if err != nil {
		fmt.Println(err)
		return
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Println(cm.Namespace+"/"+cm.Name, keys)
	for _, p := range paths[2:4] {
		fmt.Printf("%+v\n", p)
	}

	// The receiving side reads it back.
	got, hash, gotPaths, err := refresh.ParseUpgradeConfigMap(cm)
	fmt.Println(string(got), hash, len(gotPaths) == len(paths), err)
	// Output:
	// workers-a1b2-upgrade/workers-a1b2-upgrade [config hash no-reboot-paths]
	// {Path:/etc/machine-config-daemon/no-reboot/containers-gpg.pub Action:Reload Services:[crio.service]}
	// {Path:/etc/machine-config-daemon/no-reboot/containers-gpg.pub/ Action:Reload Services:[crio.service]}
	// {"ignition":{"version":"3.5.0"}} 4c8e0f1a true <nil>
}

// The receiving node trusts a no-reboot-paths list only as far as it can check it: an entry
// that is not absolute and clean, has an unknown action, or names a service outside the allowed
// ones is ignored, so its files still reboot.
func ExampleValidateNoRebootPaths() {
	raw := []byte(`[
		{"path":"/etc/containers/registries.d/","action":"Reload","services":["crio"]},
		{"path":"etc/motd","action":"None"},
		{"path":"/etc/ssh/sshd_config","action":"Restart","services":["sshd.service"]}]`)
	paths, err := refresh.ParseNoRebootPaths(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	valid, err := refresh.ValidateNoRebootPaths(paths, refresh.AllowedServices(refresh.DefaultPolicies()))
	fmt.Printf("%+v\n", valid)
	fmt.Println(err)
	// Output:
	// [{Path:/etc/containers/registries.d/ Action:Reload Services:[crio.service]}]
	// entry 1 ("etc/motd") ignored: the path must be absolute and clean, and not /
	// entry 2 ("/etc/ssh/sshd_config") ignored: service sshd.service is not allowed (allowed: coreos-update-ca-trust.service, crio.service, iri-registry.service, kubelet.service)
}

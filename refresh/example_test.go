package refresh_test

import (
	"fmt"

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
// reboot? It holds both configs and its cluster policies (here the defaults). The new config
// changes the cluster pull secret, which the default policies apply in place with no action, and
// a Chrony file, which no policy names.
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

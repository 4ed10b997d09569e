package hypershift_test

import (
	"fmt"
	"sort"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// A NodePool walked through the hash split: what the NodePool controller's Hash() and
// HashWithoutVersion() return (NextTargets, from HyperShift's own hashes) and what the refresh
// controller may deliver (DecideRefresh on the payloads the ignition server serves).
func ExampleNextTargets() {
	nodePool := hypershift.Inputs{
		MCORawConfig:   rawConfig(userMachineConfig, sshKeyDocument("ssh-ed25519 AAAA core@old"), imageMirrorDocument("quay.io/openshift-release-dev/ocp-release", "mirror-a.example.com/ocp-release")),
		ReleaseVersion: "4.18.0", PullSecretName: "pull-secret", GlobalConfig: globalConfig,
	}
	worker := baseWorker()
	var record *hypershift.Record
	step := func(name string, inputs func(*hypershift.Inputs), served func(*workerMC)) {
		before := worker
		inputs(&nodePool)
		served(&worker)
		verdict, err := hypershift.DecideRefresh(payload(before), payload(worker))
		if err != nil {
			fmt.Println(err)
			return
		}
		t := hypershift.NextTargets(record, nodePool, verdict.Refresh)
		record = &t.Record
		fmt.Printf("%s: HyperShift's Hash %s, Hash() %s, HashWithoutVersion() %s, rolls %t; refresh %s\n",
			name, hypershift.Hash(nodePool), t.Hash, t.HashWithoutVersion, t.Rolls, verdict.Reason)
	}
	step("adoption", func(*hypershift.Inputs) {}, func(*workerMC) {})
	step("pull-secret rotation", func(in *hypershift.Inputs) { in.PullSecretName = "pull-secret-2" },
		func(w *workerMC) { w.pullSecret = `{"auths":{"quay.io":{"auth":"bmV3"}}}` })
	step("ssh-key rotation", func(in *hypershift.Inputs) {
		in.MCORawConfig = rawConfig(userMachineConfig, sshKeyDocument("ssh-ed25519 BBBB core@new"), imageMirrorDocument("quay.io/openshift-release-dev/ocp-release", "mirror-a.example.com/ocp-release"))
	}, func(w *workerMC) { w.sshKey = "ssh-ed25519 BBBB core@new" })
	step("registries mirror", func(in *hypershift.Inputs) {
		in.MCORawConfig = rawConfig(userMachineConfig, sshKeyDocument("ssh-ed25519 BBBB core@new"), imageMirrorDocument("quay.io/openshift-release-dev/ocp-release", "mirror-a.example.com/ocp-release", "mirror-b.example.com/ocp-release"))
	}, func(w *workerMC) {
		w.registries += "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n    pull-from-mirror = \"digest-only\"\n"
	})
	step("kernel argument", func(in *hypershift.Inputs) {
		in.MCORawConfig = rawConfig(withKernelArgument(userMachineConfig, "nosmt"), sshKeyDocument("ssh-ed25519 BBBB core@new"), imageMirrorDocument("quay.io/openshift-release-dev/ocp-release", "mirror-a.example.com/ocp-release", "mirror-b.example.com/ocp-release"))
	}, func(w *workerMC) { w.kernelArguments = append(w.kernelArguments, "nosmt") })
	// Output:
	// adoption: HyperShift's Hash 051cbddc, Hash() 051cbddc, HashWithoutVersion() b512d3b1, rolls false; refresh NoChange
	// pull-secret rotation: HyperShift's Hash 23d2f931, Hash() 051cbddc, HashWithoutVersion() b512d3b1, rolls false; refresh Refreshable
	// ssh-key rotation: HyperShift's Hash 056d7f2c, Hash() 051cbddc, HashWithoutVersion() b512d3b1, rolls false; refresh Refreshable
	// registries mirror: HyperShift's Hash bcd27713, Hash() 051cbddc, HashWithoutVersion() b512d3b1, rolls false; refresh Refreshable
	// kernel argument: HyperShift's Hash a3a54fc2, Hash() a3a54fc2, HashWithoutVersion() 4a4ad967, rolls true; refresh NeedsReboot
}

// payload is what the ignition server serves for a worker config.
func payload(w workerMC) []byte { return served(w.machineConfig(), "kubeconfig") }

// HyperShift's in-place upgrader hands a pool's nodes the served Ignition config, its hash and
// the paths that may change without a reboot, derived from the node disruption policies.
func ExampleBuildUpgradeConfigMap() {
	payload := []byte(`{"ignition":{"version":"3.5.0"}}`)
	paths := hypershift.NoRebootPathsFromPolicies(refresh.DefaultPolicies())
	cm, err := hypershift.BuildUpgradeConfigMap("workers-a1b2", payload, "4c8e0f1a", paths)
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
	got, hash, gotPaths, err := hypershift.ParseUpgradeConfigMap(cm)
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
	paths, err := hypershift.ParseNoRebootPaths(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	valid, err := hypershift.ValidateNoRebootPaths(paths, hypershift.AllowedServices(refresh.DefaultPolicies()))
	fmt.Printf("%+v\n", valid)
	fmt.Println(err)
	// Output:
	// [{Path:/etc/containers/registries.d/ Action:Reload Services:[crio.service]}]
	// entry 1 ("etc/motd") ignored: the path must be absolute and clean, and not /
	// entry 2 ("/etc/ssh/sshd_config") ignored: service sshd.service is not allowed (allowed: coreos-update-ca-trust.service, crio.service, iri-registry.service, kubelet.service)
}

package refresh

import operatorv1 "github.com/openshift/api/operator/v1"

// Paths and units the cluster default policies name.
const (
	// registriesConf is the file whose default policy is Special: reload crio, and drain first
	// unless every change is safe (see registries.go).
	registriesConf = "/etc/containers/registries.conf"
	// forceFile asks the MCO daemon to skip validation; the MCO refuses a config that writes it.
	forceFile = "/run/machine-config-daemon-force"
)

// defaultPolicies is the MCO's table of cluster default node disruption policies, in the MCO's
// order. Source: openshift/machine-config-operator pkg/apihelpers/apihelpers.go
// (defaultClusterPolicies) at commit 7ff337a4 (2026-08-20); the InternalReleaseImage (IRI) file and
// unit policies were added there in 2026-02 (AGENT-1416). Keep it in step with that table.
var defaultPolicies = Policies{
	Files: []operatorv1.NodeDisruptionPolicyStatusFile{
		filePolicy("/var/lib/kubelet/config.json", none()),
		filePolicy("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", reload("crio.service")),
		filePolicy("/etc/containers/policy.json", reload("crio.service")),
		filePolicy(registriesConf, operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.SpecialStatusAction}),
		filePolicy("/etc/containers/registries.d", reload("crio.service")),
		filePolicy("/etc/crio/policies", reload("crio.service")),
		filePolicy("/etc/nmstate/openshift", none()),
		filePolicy("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
			restart("coreos-update-ca-trust.service"), restart("crio.service")),
		filePolicy("/etc/kubernetes/credential-providers", restart("kubelet.service")),
		filePolicy("/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
			daemonReload(), restart("kubelet.service")),
		filePolicy("/etc/iri-registry", restart("iri-registry.service")),
		filePolicy("/usr/local/bin/load-registry-image.sh", restart("iri-registry.service")),
		filePolicy("/etc/pki/ca-trust/source/anchors/iri-root-ca.crt", restart("coreos-update-ca-trust.service")),
	},
	Units: []operatorv1.NodeDisruptionPolicyStatusUnit{
		{Name: "iri-registry.service", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{daemonReload(), restart("iri-registry.service")}},
	},
	SSHKey: operatorv1.NodeDisruptionPolicyStatusSSHKey{Actions: []operatorv1.NodeDisruptionPolicyStatusAction{none()}},
}

// DefaultPolicies returns a copy of the MCO's cluster default policies.
func DefaultPolicies() Policies { return *defaultPolicies.DeepCopy() }

func filePolicy(p string, actions ...operatorv1.NodeDisruptionPolicyStatusAction) operatorv1.NodeDisruptionPolicyStatusFile {
	return operatorv1.NodeDisruptionPolicyStatusFile{Path: p, Actions: actions}
}

func none() operatorv1.NodeDisruptionPolicyStatusAction {
	return operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.NoneStatusAction}
}

func daemonReload() operatorv1.NodeDisruptionPolicyStatusAction {
	return operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.DaemonReloadStatusAction}
}

func reload(unit string) operatorv1.NodeDisruptionPolicyStatusAction {
	return operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.ReloadStatusAction,
		Reload: &operatorv1.ReloadService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}}
}

func restart(unit string) operatorv1.NodeDisruptionPolicyStatusAction {
	return operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.RestartStatusAction,
		Restart: &operatorv1.RestartService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}}
}

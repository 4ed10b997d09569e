package manifests

// The shipped manifests. Their names follow the MCO's install/: the CVO applies the payload's
// manifests in the order of their names, 0000_80 being the MCO's run level, 0000_90 where the
// MCO puts its monitoring objects.
const (
	RBACFile = "0000_80_machine-config_10_bootimage-operator_rbac.yaml"
	// CredentialsFile is the CredentialsRequest of the operator's AWS credentials, for AMI copies.
	CredentialsFile = "0000_80_machine-config_10_bootimage-operator_credentialsrequest.yaml"
	DeploymentFile  = "0000_80_machine-config_11_bootimage-operator_deployment.yaml"
	AdmissionFile   = "0000_80_machine-config_12_bootimage-operator_admission.yaml"
	MetricsFile     = "0000_90_machine-config_10_bootimage-operator_metrics.yaml"
	// DashboardFile is the console dashboard drawn from the operator's metrics: a ConfigMap in
	// openshift-config-managed, where the console reads dashboards.
	DashboardFile = "0000_90_machine-config_11_bootimage-operator_dashboard.yaml"
)

package bootimage

import (
	"fmt"
	"strconv"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// Oldest boot images a release can still scale with.
var (
	MinimumOCPVersion   = version.MustParseGeneric("4.13.0")
	MinimumRHCOSVersion = version.MustParseGeneric("9.2")
)

// SkewInputs is what the boot image skew enforcement status is computed from.
type SkewInputs struct {
	Spec      operatorv1.BootImageSkewEnforcementConfig
	Current   operatorv1.BootImageSkewEnforcementStatus
	Platform  configv1.PlatformType
	Topology  configv1.TopologyMode
	Effective operatorv1.ManagedBootImages
	Gates     Gates
	// InstallVersion is the release the cluster was installed with: the oldest Completed entry of
	// ClusterVersion status.history.
	InstallVersion string
}

// SkewEnforcementStatus computes status.bootImageSkewEnforcementStatus: the spec's mode when set;
// else None on single-node and bare metal; Automatic while MachineSets are managed with All;
// else Manual with the install version as the boot image version.
func SkewEnforcementStatus(in SkewInputs) operatorv1.BootImageSkewEnforcementStatus {
	switch in.Spec.Mode {
	case operatorv1.BootImageSkewEnforcementConfigModeManual:
		return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusManual, Manual: in.Spec.Manual}
	case operatorv1.BootImageSkewEnforcementConfigModeNone:
		return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}
	}
	if in.Topology == configv1.SingleReplicaTopologyMode || in.Platform == configv1.BareMetalPlatformType {
		return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}
	}
	if MachineSetsSupported(in.Platform, in.Gates) {
		if entry, ok := findEntry(in.Effective.MachineManagers, operatorv1.MachineSets); ok && entry.Selection.Mode == operatorv1.All {
			automatic := in.Current.Automatic
			if automatic == (operatorv1.ClusterBootImageAutomatic{}) {
				// Nothing updated yet: the boot images are those the cluster was installed with.
				automatic = operatorv1.ClusterBootImageAutomatic{OCPVersion: in.InstallVersion}
			}
			return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: automatic}
		}
	}
	return operatorv1.BootImageSkewEnforcementStatus{
		Mode:   operatorv1.BootImageSkewEnforcementModeStatusManual,
		Manual: operatorv1.ClusterBootImageManual{Mode: operatorv1.ClusterBootImageSpecModeOCPVersion, OCPVersion: in.InstallVersion},
	}
}

// SkewViolation returns a message saying what to do when the recorded boot image of status is
// older than the oldest one the release supports, or "" when it is not (or nothing is enforced).
func SkewViolation(status operatorv1.BootImageSkewEnforcementStatus) string {
	var ocp, rhcos string
	switch status.Mode {
	case operatorv1.BootImageSkewEnforcementModeStatusAutomatic:
		ocp, rhcos = status.Automatic.OCPVersion, status.Automatic.RHCOSVersion
	case operatorv1.BootImageSkewEnforcementModeStatusManual:
		ocp, rhcos = status.Manual.OCPVersion, status.Manual.RHCOSVersion
	default:
		return ""
	}
	fix := "update the boot images of your MachineSets"
	if status.Mode == operatorv1.BootImageSkewEnforcementModeStatusManual {
		fix += " and record the new version in spec.bootImageSkewEnforcement.manual"
	}
	fix += ", or set spec.bootImageSkewEnforcement.mode to None to accept that new machines may fail to join"
	if v, err := version.ParseGeneric(ocp); err == nil && v.LessThan(MinimumOCPVersion) {
		return fmt.Sprintf("Upgrades are blocked: the cluster's boot images are from OCP %s, older than the oldest supported OCP %s: %s", ocp, MinimumOCPVersion, fix)
	}
	if v, ok := rhelVersion(rhcos); ok && v.LessThan(MinimumRHCOSVersion) {
		return fmt.Sprintf("Upgrades are blocked: the cluster's boot images are RHCOS %s (RHEL %d.%d), older than the oldest supported RHEL %d.%d: %s",
			rhcos, v.Major(), v.Minor(), MinimumRHCOSVersion.Major(), MinimumRHCOSVersion.Minor(), fix)
	}
	return ""
}

// rhelVersion returns the RHEL major.minor of an RHCOS version: "9.2.20230101-0" is 9.2, and the
// legacy "413.92.202305021736-0" (OCP 4.13 on RHEL 9.2) is 9.2 too.
func rhelVersion(rhcos string) (*version.Version, bool) {
	parts := strings.SplitN(rhcos, ".", 3)
	if len(parts) < 2 {
		return nil, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return nil, false
	}
	if major >= 100 {
		major, minor = minor/10, minor%10
	}
	return version.MajorMinor(uint(major), uint(minor)), true
}

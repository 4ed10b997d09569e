package bootimage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// Oldest boot images a release can still scale with.
var (
	minimumOCPVersion   = version.MustParseGeneric("4.13.0")
	minimumRHCOSVersion = version.MustParseGeneric("9.2")
)

// unknownOCPVersion is recorded when the install version cannot be read: the most conservative
// claim, as the MCO makes it, so that an unknown past still shows as a violation.
const unknownOCPVersion = "0.0.0"

// SkewInputs is what the boot image skew enforcement status is computed from.
type SkewInputs struct {
	Spec      operatorv1.BootImageSkewEnforcementConfig
	Current   operatorv1.BootImageSkewEnforcementStatus
	Platform  configv1.PlatformType
	Topology  configv1.TopologyMode
	Effective operatorv1.ManagedBootImages
	Gates     Gates
	// InstallVersion is the release the cluster was installed with: the oldest Completed entry of
	// ClusterVersion status.history; any form (nightly, OKD), it is normalised here.
	InstallVersion string
	// Pass is the outcome of the latest finished pass over the MachineSets, the Cluster API ones
	// and MachineDeployments counted alike (Progress.Pass); nil while one is under
	// way or none has finished.
	Pass *SkewPass
}

// SkewPass is what a finished pass over the MachineSets achieved.
type SkewPass struct {
	// LeftBehind names the selected MachineSets and MachineDeployments the operator could not
	// update by itself; objects another API is authoritative for are not among them
	// (Decision.LeftBehind).
	LeftBehind []string
	// Errors counts MachineSets in Error.
	Errors int
	// ReleaseVersion is coreos-bootimages' releaseVersion: the release whose boot images the
	// up-to-date MachineSets now use.
	ReleaseVersion string
	// RHCOSVersion, when set, is the oldest RHCOS version chosen for a marketplace MachineSet,
	// recorded instead of ReleaseVersion because marketplace images may lag the release.
	RHCOSVersion string
}

// normalizeOCPVersion returns v as major.minor.patch, the only form the API accepts
// ("4.22.0-0.nightly-2026-01-01-000000" and "4.21.0-okd-scos.5" give 4.22.0 and 4.21.0); false
// when v has no such prefix.
func normalizeOCPVersion(v string) (string, bool) {
	parsed, err := version.ParseGeneric(v)
	if err != nil || len(parsed.Components()) < 2 {
		return "", false
	}
	return fmt.Sprintf("%d.%d.%d", parsed.Major(), parsed.Minor(), parsed.Patch()), true
}

// rhcosVersionPattern is the API's rule for rhcosVersion.
var rhcosVersionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.([0-9]{8}|[0-9]{12})-[0-9]+$`)

// SkewEnforcementStatus computes status.bootImageSkewEnforcementStatus: the spec's mode when set;
// else None on single-node and bare metal; Automatic while MachineSets are managed with All;
// else Manual with the install version as the boot image version. Automatic records what was
// achieved: after a pass that left every selected MachineSet on the stream, the stream's release
// (or the marketplace RHCOS version); after a pass that left some behind, the install version; while
// a pass is under way or ended with errors, the previous record. Every version written is valid.
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
	install, ok := normalizeOCPVersion(in.InstallVersion)
	if !ok {
		install = unknownOCPVersion
	}
	if MachineSetsSupported(in.Platform, in.Gates) {
		if entry, ok := findEntry(in.Effective.MachineManagers, operatorv1.MachineSets); ok && entry.Selection.Mode == operatorv1.All {
			return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: automaticRecord(in, install)}
		}
	}
	return operatorv1.BootImageSkewEnforcementStatus{
		Mode:   operatorv1.BootImageSkewEnforcementModeStatusManual,
		Manual: operatorv1.ClusterBootImageManual{Mode: operatorv1.ClusterBootImageSpecModeOCPVersion, OCPVersion: install},
	}
}

func automaticRecord(in SkewInputs, install string) operatorv1.ClusterBootImageAutomatic {
	installed := operatorv1.ClusterBootImageAutomatic{OCPVersion: install}
	previous := installed
	if in.Current.Mode == operatorv1.BootImageSkewEnforcementModeStatusAutomatic && validAutomatic(in.Current.Automatic) {
		previous = in.Current.Automatic
	}
	switch p := in.Pass; {
	case p == nil || p.Errors > 0:
		// Errors show as Degraded, which holds upgrades by itself; the record waits for a clean pass.
		return previous
	case len(p.LeftBehind) > 0:
		return installed
	case p.RHCOSVersion != "" && rhcosVersionPattern.MatchString(p.RHCOSVersion):
		return operatorv1.ClusterBootImageAutomatic{RHCOSVersion: p.RHCOSVersion}
	}
	if v, ok := normalizeOCPVersion(in.Pass.ReleaseVersion); ok {
		return operatorv1.ClusterBootImageAutomatic{OCPVersion: v}
	}
	return previous
}

func validAutomatic(a operatorv1.ClusterBootImageAutomatic) bool {
	if a.OCPVersion != "" {
		v, ok := normalizeOCPVersion(a.OCPVersion)
		return ok && v == a.OCPVersion && (a.RHCOSVersion == "" || rhcosVersionPattern.MatchString(a.RHCOSVersion))
	}
	return rhcosVersionPattern.MatchString(a.RHCOSVersion)
}

// SkewGuard is the upgrade guard of boot image skew enforcement: what the MCO's status sync, or
// this operator's own ClusterOperator, reports as Upgradeable.
type SkewGuard struct {
	Mode operatorv1.BootImageSkewEnforcementModeStatus
	// Recorded is the boot image version compared, such as "OCP 4.12.9" or "RHCOS 9.6.20250701-0".
	Recorded string
	// Threshold is the oldest boot image the release supports.
	Threshold string
	// Blocked is true while upgrades must be held; Message then says why and what to do.
	Blocked bool
	Message string
	// Failing is true when boot image updates failing (Degraded, in Automatic mode) are what
	// blocks: the failed objects are the ones to fix, not the skipped ones.
	Failing bool
}

// EvaluateSkewGuard decides the upgrade guard from MachineConfiguration status, as the MCO does: in
// Automatic mode a degraded boot image controller blocks upgrades, and one still progressing (or
// not yet through its first pass) does not decide yet; in Automatic and Manual modes a recorded
// boot image older than the threshold blocks them; None never does.
func EvaluateSkewGuard(status operatorv1.MachineConfigurationStatus) SkewGuard {
	skew := status.BootImageSkewEnforcementStatus
	g := SkewGuard{Mode: skew.Mode, Threshold: fmt.Sprintf("OCP %s or RHEL %d.%d", minimumOCPVersion, minimumRHCOSVersion.Major(), minimumRHCOSVersion.Minor())}
	switch skew.Mode {
	case operatorv1.BootImageSkewEnforcementModeStatusAutomatic:
		g.Recorded = recorded(skew.Automatic.OCPVersion, skew.Automatic.RHCOSVersion)
		if c := meta.FindStatusCondition(status.Conditions, operatorv1.MachineConfigurationBootImageUpdateDegraded); c != nil && c.Status == metav1.ConditionTrue {
			g.Blocked, g.Failing, g.Message = true, true, "Upgrades are blocked because boot image updates are failing: "+c.Message
			return g
		}
		if c := meta.FindStatusCondition(status.Conditions, operatorv1.MachineConfigurationBootImageUpdateProgressing); c == nil || c.Status != metav1.ConditionFalse {
			return g
		}
	case operatorv1.BootImageSkewEnforcementModeStatusManual:
		g.Recorded = recorded(skew.Manual.OCPVersion, skew.Manual.RHCOSVersion)
	default:
		return g
	}
	g.Message = skewViolation(skew)
	g.Blocked = g.Message != ""
	return g
}

func recorded(ocp, rhcos string) string {
	if ocp != "" {
		return "OCP " + ocp
	}
	return "RHCOS " + rhcos
}

// skewViolation returns a message saying what to do when the recorded boot image of status is
// older than the oldest one the release supports, or "" when it is not (or nothing is enforced).
func skewViolation(status operatorv1.BootImageSkewEnforcementStatus) string {
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
	if ocp == unknownOCPVersion {
		return fmt.Sprintf("Upgrades are blocked: the version of the cluster's boot images is unknown (ClusterVersion/version has no Completed history entry): %s", fix)
	}
	if v, err := version.ParseGeneric(ocp); err == nil && v.LessThan(minimumOCPVersion) {
		return fmt.Sprintf("Upgrades are blocked: the cluster's boot images are from OCP %s, older than the oldest supported OCP %s: %s", ocp, minimumOCPVersion, fix)
	}
	if v, ok := RHELVersion(rhcos); ok && v.LessThan(minimumRHCOSVersion) {
		return fmt.Sprintf("Upgrades are blocked: the cluster's boot images are RHCOS %s (RHEL %d.%d), older than the oldest supported RHEL %d.%d: %s",
			rhcos, v.Major(), v.Minor(), minimumRHCOSVersion.Major(), minimumRHCOSVersion.Minor(), fix)
	}
	return ""
}

// RHELVersion returns the RHEL major.minor of an RHCOS version: "9.2.20230101-0" is 9.2, and the
// legacy "413.92.202305021736-0" (OCP 4.13 on RHEL 9.2) is 9.2 too.
func RHELVersion(rhcos string) (*version.Version, bool) {
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

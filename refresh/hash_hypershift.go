package refresh

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// HyperShiftHashInputs are the inputs of HyperShift's NodePool config hash (ConfigGenerator.Hash
// at openshift/hypershift 3ee96155), which names the token and user-data Secrets, the MachineSet
// target annotation and, through the in-place upgrader, each node's currentConfig.
type HyperShiftHashInputs struct {
	// MCORawConfig is the MCO raw config: the pool's MachineConfigs as HyperShift concatenates them.
	MCORawConfig   string
	ReleaseVersion string
	// PullSecretName and AdditionalTrustBundleName are names, not contents: a new pull secret
	// under the same name does not move the hash.
	PullSecretName            string
	AdditionalTrustBundleName string
	// GlobalConfig is the JSON of the HostedCluster's global config that rolls nodes.
	GlobalConfig string
	// RHELStream is empty unless the pool asks for a stream other than the release's default.
	RHELStream string
}

// HyperShiftConfigHash is HyperShift's config hash: FNV-1a 32-bit as 8 lowercase hex digits over
// the inputs concatenated without separators, in the order of HyperShiftHashInputs. HyperShift
// keeps this encoding for backward compatibility, so it must not be "improved" here.
func HyperShiftConfigHash(in HyperShiftHashInputs) string {
	return fnv32a(in.MCORawConfig + in.ReleaseVersion + in.PullSecretName + in.AdditionalTrustBundleName + in.GlobalConfig + in.RHELStream)
}

// HyperShiftConfigHashWithoutVersion is HyperShift's HashWithoutVersion, which tells a rollout
// driven by a new release from one driven by config: the same without the release version and,
// as in HyperShift, without the global config.
func HyperShiftConfigHashWithoutVersion(in HyperShiftHashInputs) string {
	return fnv32a(in.MCORawConfig + in.PullSecretName + in.AdditionalTrustBundleName + in.RHELStream)
}

func fnv32a(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// RolloutRecordAnnotation is the NodePool annotation that keeps the RolloutRecord.
const RolloutRecordAnnotation = "hypershift.openshift.io/nodePoolRolloutRecord"

// RolloutRecord is what a NodePool keeps of its last rollout target: the target (HyperShift's
// config hash when it was chosen) and the RolloutHash of the rollout inputs at that moment.
type RolloutRecord struct {
	Target string
	Inputs string
}

// String is the annotation value, "<target>/<inputs>".
func (r RolloutRecord) String() string { return r.Target + "/" + r.Inputs }

// ParseRolloutRecord reads a RolloutRecordAnnotation value.
func ParseRolloutRecord(s string) (RolloutRecord, error) {
	target, inputs, ok := strings.Cut(s, "/")
	if !ok || target == "" || inputs == "" || strings.Contains(inputs, "/") {
		return RolloutRecord{}, fmt.Errorf("rollout record %q is not <target>/<rollout inputs hash>", s)
	}
	return RolloutRecord{Target: target, Inputs: inputs}, nil
}

// RolloutTarget is a pool's rollout target and the record to keep for it.
type RolloutTarget struct {
	// Target names the Secrets and goes to the MachineSet target annotation.
	Target string
	// Record is what to store in RolloutRecordAnnotation (unchanged when nothing moved).
	Record RolloutRecord
	// Moved is true when Target differs from the recorded one: nodes roll (or reboot).
	Moved bool
	// Reason says why, for a log line.
	Reason string
}

// NextRolloutTarget chooses a pool's rollout target with the hash split adopted, so that no
// existing NodePool moves on adoption and payload-only changes never move it:
//
//   - no record (the first reconcile after the upgrade that adopts the split): the target is
//     HyperShiftConfigHash of the inputs, the very value HyperShift computes without the split,
//     recorded with the RolloutHash of the rollout inputs;
//   - the rollout inputs hash as recorded: the recorded target stays, whatever payload input
//     (pull secret, trust bundle, ssh key, ...) moved HyperShift's hash meanwhile;
//   - a rollout input changed: the target is HyperShiftConfigHash of the inputs now, recorded.
//
// The payload side is PayloadHash, kept apart (a NodePool annotation and the node's
// currentRefreshConfig), never mixed into the target.
func NextRolloutTarget(record *RolloutRecord, legacy HyperShiftHashInputs, rollout RolloutInputs) RolloutTarget {
	inputs := RolloutHash(rollout)
	if record == nil {
		t := HyperShiftConfigHash(legacy)
		return RolloutTarget{Target: t, Record: RolloutRecord{Target: t, Inputs: inputs},
			Reason: "Adopted the hash split: the target is HyperShift's config hash, as before"}
	}
	if record.Inputs == inputs {
		return RolloutTarget{Target: record.Target, Record: *record, Reason: "No rollout input changed"}
	}
	t := HyperShiftConfigHash(legacy)
	return RolloutTarget{Target: t, Record: RolloutRecord{Target: t, Inputs: inputs}, Moved: t != record.Target,
		Reason: "A rollout input changed"}
}

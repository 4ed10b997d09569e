package hypershift

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Inputs are the inputs of HyperShift's NodePool config hash, ConfigGenerator.Hash(), as its
// rolloutConfig holds them (openshift/hypershift 3ee96155,
// hypershift-operator/controllers/nodepool/config.go).
type Inputs struct {
	// MCORawConfig is generateMCORawConfig's output: every config document of the pool (the
	// core ConfigMaps', the user's, NTO's, haproxy's), sorted and joined by "\n---\n".
	MCORawConfig   string
	ReleaseVersion string
	// PullSecretName and AdditionalTrustBundleName are names: HyperShift hashes no contents.
	PullSecretName            string
	AdditionalTrustBundleName string
	// GlobalConfig is globalConfigString's output: the proxy JSON and the image config JSON,
	// each on its own line, and from release 4.23 the TLS profile on a third.
	GlobalConfig string
	// RHELStream is empty unless the pool asks for a stream other than the release's default.
	RHELStream string
}

// Hash is ConfigGenerator.Hash(): FNV-1a 32-bit as 8 lowercase hex digits over the inputs
// concatenated without separators. HyperShift keeps this encoding for backward compatibility, so
// it must not be "improved" here.
func Hash(in Inputs) string {
	return fnv32a(in.MCORawConfig + in.ReleaseVersion + in.PullSecretName + in.AdditionalTrustBundleName + in.GlobalConfig + in.RHELStream)
}

// HashWithoutVersion is ConfigGenerator.HashWithoutVersion(), which tells a rollout driven by a
// release from one driven by config: Hash without the release version and, as in HyperShift,
// without the global config.
func HashWithoutVersion(in Inputs) string {
	return fnv32a(in.MCORawConfig + in.PullSecretName + in.AdditionalTrustBundleName + in.RHELStream)
}

func fnv32a(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// The documents of the MCO raw config that carry payload inputs, both written by the control
// plane operator into core ConfigMaps: the ssh key (ConfigMap ignition-config-worker-ssh) and
// HostedCluster spec.imageContentSources (ConfigMap ignition-config-40-image-content-source).
const (
	SSHKeyMachineConfig = "99-worker-ssh" // a MachineConfig
	ImageMirrorSet      = "cluster"       // an ImageDigestMirrorSet
)

const (
	documentSeparator  = "\n---\n" // generateMCORawConfig's join
	machineConfigKind  = "MachineConfig"
	imageMirrorSetKind = "ImageDigestMirrorSet"
	// splitDomain versions the encoding: changing it moves every record, so it needs a migration.
	splitDomain = "hypershift-split/v1"
)

// Contents are the payload inputs HyperShift hashes by name only, so that a new pull secret or
// trust bundle under the same name moves the payload hash.
type Contents struct {
	PullSecret            []byte
	AdditionalTrustBundle []byte
}

// Split is Inputs taken apart into what needs new nodes and what a config refresh may deliver,
// each as a SHA-256 (hex) over a canonical encoding.
type Split struct {
	// Rollout covers the MCO raw config without its payload documents, the release version, the
	// RHEL stream and the global config beyond proxy and image (the TLS profile).
	Rollout string
	// Config is Rollout without the release version and the global config: what moves
	// HashWithoutVersion, the config side of a rollout.
	Config string
	// Payload covers the ssh key and image-mirror documents, the pull-secret and trust-bundle
	// names and Contents, and the proxy and image config: the refresh target.
	Payload string
}

// SplitInputs takes Inputs apart. A document that does not parse, and a global config not in
// globalConfigString's shape, stay whole on the rollout side: a change there rolls, as before.
func SplitInputs(in Inputs, contents Contents) Split {
	rolloutDocs, payloadDocs := splitDocuments(in.MCORawConfig)
	proxyAndImage, tls := splitGlobalConfig(in.GlobalConfig)

	config := newEncoder(splitDomain + "/config")
	config.list("documents", rolloutDocs)
	config.string("rhelStream", in.RHELStream)
	configHash := config.sum()

	rollout := newEncoder(splitDomain + "/rollout")
	rollout.string("config", configHash)
	rollout.string("releaseVersion", in.ReleaseVersion)
	rollout.string("globalConfig", tls)

	payload := newEncoder(splitDomain + "/payload")
	payload.list("documents", payloadDocs)
	payload.string("pullSecretName", in.PullSecretName)
	payload.bytes("pullSecret", contents.PullSecret)
	payload.string("additionalTrustBundleName", in.AdditionalTrustBundleName)
	payload.bytes("additionalTrustBundle", contents.AdditionalTrustBundle)
	payload.list("globalConfig", proxyAndImage)
	return Split{Rollout: rollout.sum(), Config: configHash, Payload: payload.sum()}
}

// splitDocuments takes the MCO raw config apart, keeping each side in HyperShift's sorted order.
func splitDocuments(raw string) (rollout, payload []string) {
	if raw == "" {
		return nil, nil
	}
	for _, doc := range strings.Split(raw, documentSeparator) {
		if isPayloadDocument(doc) {
			payload = append(payload, doc)
		} else {
			rollout = append(rollout, doc)
		}
	}
	return rollout, payload
}

func isPayloadDocument(doc string) bool {
	var probe struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil || json.Unmarshal(raw, &probe) != nil {
		return false
	}
	return (probe.Kind == machineConfigKind && probe.Metadata.Name == SSHKeyMachineConfig) ||
		(probe.Kind == imageMirrorSetKind && probe.Metadata.Name == ImageMirrorSet)
}

// splitGlobalConfig returns globalConfigString's proxy and image lines, and the rest (the TLS
// profile). Anything else is returned whole as the rest.
func splitGlobalConfig(global string) (proxyAndImage []string, rest string) {
	lines := strings.SplitAfterN(global, "\n", 3)
	if len(lines) < 2 || !strings.HasSuffix(lines[1], "\n") || !json.Valid([]byte(lines[0])) || !json.Valid([]byte(lines[1])) {
		return nil, global
	}
	if len(lines) == 3 {
		rest = lines[2]
	}
	return lines[:2], rest
}

// RecordAnnotation is the NodePool annotation that keeps the Record.
const RecordAnnotation = "hypershift.openshift.io/nodePoolRolloutRecord"

// Record is what a NodePool keeps of its last rollout: what Hash() and HashWithoutVersion()
// returned for it, and the Split's Rollout and Config hashes of its inputs then.
type Record struct {
	Hash, HashWithoutVersion string
	Rollout, Config          string
}

// String is the annotation value, "<hash>/<hashWithoutVersion>/<rollout>/<config>".
func (r Record) String() string {
	return strings.Join([]string{r.Hash, r.HashWithoutVersion, r.Rollout, r.Config}, "/")
}

// ParseRecord reads a RecordAnnotation value.
func ParseRecord(s string) (Record, error) {
	f := strings.Split(s, "/")
	if len(f) != 4 || f[0] == "" || f[1] == "" || f[2] == "" || f[3] == "" {
		return Record{}, fmt.Errorf("rollout record %q is not <hash>/<hashWithoutVersion>/<rollout>/<config>", s)
	}
	return Record{Hash: f[0], HashWithoutVersion: f[1], Rollout: f[2], Config: f[3]}, nil
}

// Targets are what ConfigGenerator.Hash() and HashWithoutVersion() return with the split
// adopted, and the record to keep.
type Targets struct {
	// Hash names the token and user-data Secrets, goes to the MachineSet target annotation and
	// nodePoolCurrentConfigVersion, and through the upgrader to each node's currentConfig.
	Hash string
	// HashWithoutVersion drives nodePoolCurrentConfig and the UpdatingConfig condition.
	HashWithoutVersion string
	// Record is what to store in RecordAnnotation (unchanged when nothing moved: no write).
	Record Record
	// Rolls is true when Hash differs from the recorded one: nodes are replaced or upgraded.
	Rolls bool
	// Reason says why, for a log line.
	Reason string
}

// NextTargets chooses a NodePool's targets with the split adopted. Both come from HyperShift's
// own functions, so no existing NodePool moves on adoption, and a payload-only change moves
// neither:
//
//   - no record (the first reconcile after the upgrade that adopts the split): Hash and
//     HashWithoutVersion of the inputs, the very values HyperShift computes today;
//   - the rollout side as recorded: the recorded values stay, whatever payload input (ssh key,
//     image mirrors, pull secret, trust bundle, proxy, image config) moved HyperShift's hashes;
//   - a rollout input changed: Hash of the inputs now; HashWithoutVersion of the inputs now
//     when the config side changed, the recorded one when only the release version or the TLS
//     profile did (so a release upgrade is not reported as a config update);
//   - refreshable false (the refresh controller found the pending payload change cannot be
//     delivered without a drain or a reboot: Verdict.Refresh false): both of the inputs now,
//     so the change rolls out as it does today.
func NextTargets(record *Record, in Inputs, refreshable bool) Targets {
	split := SplitInputs(in, Contents{})
	now := Record{Hash: Hash(in), HashWithoutVersion: HashWithoutVersion(in), Rollout: split.Rollout, Config: split.Config}
	switch {
	case record == nil:
		return Targets{Hash: now.Hash, HashWithoutVersion: now.HashWithoutVersion, Record: now,
			Reason: "Adopted the hash split: the targets are HyperShift's hashes, as before"}
	case record.Rollout == now.Rollout && (refreshable || now.Hash == record.Hash):
		return Targets{Hash: record.Hash, HashWithoutVersion: record.HashWithoutVersion, Record: *record,
			Reason: "No rollout input changed"}
	case record.Rollout == now.Rollout:
		return Targets{Hash: now.Hash, HashWithoutVersion: now.HashWithoutVersion, Record: now, Rolls: true,
			Reason: "A payload change cannot be delivered without a drain or a reboot: it rolls out"}
	}
	if record.Config == now.Config {
		now.HashWithoutVersion = record.HashWithoutVersion
	}
	return Targets{Hash: now.Hash, HashWithoutVersion: now.HashWithoutVersion, Record: now, Rolls: now.Hash != record.Hash,
		Reason: "A rollout input changed"}
}

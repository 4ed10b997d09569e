package refresh_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// Expected values computed by hand from the rule: FNV-1a 32-bit (offset basis 2166136261, prime
// 16777619, xor each byte then multiply mod 2^32) over the fields concatenated, as %08x.
var _ = Describe("HyperShift's config hash", func() {
	pool := refresh.HyperShiftHashInputs{
		MCORawConfig: "mco", ReleaseVersion: "4.20.0", PullSecretName: "pull-secret",
		AdditionalTrustBundleName: "user-ca-bundle", GlobalConfig: `{"proxy":{}}`,
	}

	DescribeTable("reproduces HyperShift's values",
		func(in refresh.HyperShiftHashInputs, want string) {
			Expect(refresh.HyperShiftConfigHash(in)).To(Equal(want))
		},
		Entry("no inputs: the FNV-1a offset basis", refresh.HyperShiftHashInputs{}, "811c9dc5"),
		Entry("the published FNV-1a vector for \"a\"", refresh.HyperShiftHashInputs{MCORawConfig: "a"}, "e40c292c"),
		Entry("a pool", pool, "6669fa99"),
		Entry("a pool on a non-default RHEL stream", with(pool, func(in *refresh.HyperShiftHashInputs) { in.RHELStream = "rhel-9" }), "3408954c"),
		Entry("fields concatenate without separators, as in HyperShift", with(pool, func(in *refresh.HyperShiftHashInputs) {
			in.MCORawConfig, in.ReleaseVersion = "mco4", ".20.0"
		}), "6669fa99"),
	)

	It("leaves the release version and the global config out of HashWithoutVersion", func() {
		Expect(refresh.HyperShiftConfigHashWithoutVersion(pool)).To(Equal("6405c829"))
		Expect(refresh.HyperShiftConfigHashWithoutVersion(with(pool, func(in *refresh.HyperShiftHashInputs) {
			in.ReleaseVersion, in.GlobalConfig = "4.21.0", "{}"
		}))).To(Equal("6405c829"))
	})
})

var _ = Describe("Adopting the hash split", func() {
	legacy := refresh.HyperShiftHashInputs{
		MCORawConfig: "mco", ReleaseVersion: "4.20.0", PullSecretName: "pull-secret",
		AdditionalTrustBundleName: "user-ca-bundle", GlobalConfig: `{"proxy":{}}`,
	}
	rollout := refresh.RolloutInputs{ReleaseImage: "quay.io/openshift-release-dev/ocp-release@sha256:1", MachineConfigs: []string{"99-worker-custom"}, OSImage: "quay.io/rhcos@sha256:2"}
	payload := refresh.PayloadInputs{SSHKey: "ssh-ed25519 AAAA", PullSecret: []byte(`{"auths":{}}`)}
	// What HyperShift computed before the upgrade: it names the Secrets, the MachineSet target
	// annotation and, through the upgrader, every node's currentConfig.
	const existingTarget = "6669fa99"

	It("keeps an existing NodePool's target on the upgrade that adopts it", func() {
		next := refresh.NextRolloutTarget(nil, legacy, rollout)
		Expect(next.Target).To(Equal(existingTarget))
		Expect(next.Moved).To(BeFalse())
		Expect(next.Record).To(Equal(refresh.RolloutRecord{Target: existingTarget, Inputs: refresh.RolloutHash(rollout)}))

		again := refresh.NextRolloutTarget(&next.Record, legacy, rollout)
		Expect(again.Target).To(Equal(existingTarget))
		Expect(again.Record).To(Equal(next.Record), "no write on a second reconcile")
	})

	It("leaves the rollout side alone on a payload-only change, and moves the payload hash", func() {
		record := refresh.NextRolloutTarget(nil, legacy, rollout).Record
		// A new pull secret under a new name: HyperShift's own hash moves...
		newLegacy := with(legacy, func(in *refresh.HyperShiftHashInputs) { in.PullSecretName = "pull-secret-2" })
		Expect(refresh.HyperShiftConfigHash(newLegacy)).To(Equal("2b241fda"))
		newPayload := payload
		newPayload.PullSecret = []byte(`{"auths":{"quay.io":{}}}`)

		// ...the target does not, and the change is the refresh's.
		next := refresh.NextRolloutTarget(&record, newLegacy, rollout)
		Expect(next.Target).To(Equal(existingTarget))
		Expect(next.Moved).To(BeFalse())
		Expect(next.Record).To(Equal(record))
		Expect(refresh.PayloadHash(newPayload)).NotTo(Equal(refresh.PayloadHash(payload)))
	})

	It("moves the target to HyperShift's hash when a rollout input changes", func() {
		record := refresh.NextRolloutTarget(nil, legacy, rollout).Record
		newLegacy := with(legacy, func(in *refresh.HyperShiftHashInputs) { in.ReleaseVersion = "4.20.1" })
		newRollout := rollout
		newRollout.ReleaseImage = "quay.io/openshift-release-dev/ocp-release@sha256:3"
		next := refresh.NextRolloutTarget(&record, newLegacy, newRollout)
		Expect(next.Target).To(Equal("d6d65ef4"))
		Expect(next.Moved).To(BeTrue())
		Expect(next.Record).To(Equal(refresh.RolloutRecord{Target: "d6d65ef4", Inputs: refresh.RolloutHash(newRollout)}))
	})

	It("reads and writes the record annotation, and says what is wrong with a bad one", func() {
		r := refresh.RolloutRecord{Target: existingTarget, Inputs: refresh.RolloutHash(rollout)}
		got, err := refresh.ParseRolloutRecord(r.String())
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal(r))
		for _, bad := range []string{"", "6669fa99", "/abc", "6669fa99/", "a/b/c"} {
			_, err := refresh.ParseRolloutRecord(bad)
			Expect(err).To(MatchError(ContainSubstring("is not <target>/<rollout inputs hash>")), bad)
		}
	})
})

func with[T any](v T, change func(*T)) T {
	change(&v)
	return v
}

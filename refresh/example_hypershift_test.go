package refresh_test

import (
	"fmt"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// The NodePool controller's question on every reconcile after adopting the hash split: which
// rollout target? On adoption it is HyperShift's own hash, so nothing rolls; a new pull secret
// name afterwards moves HyperShift's hash but not the target.
func ExampleNextRolloutTarget() {
	legacy := refresh.HyperShiftHashInputs{
		MCORawConfig: "mco", ReleaseVersion: "4.20.0", PullSecretName: "pull-secret",
		AdditionalTrustBundleName: "user-ca-bundle", GlobalConfig: `{"proxy":{}}`,
	}
	rollout := refresh.RolloutInputs{ReleaseImage: "quay.io/openshift-release-dev/ocp-release@sha256:1"}

	adopted := refresh.NextRolloutTarget(nil, legacy, rollout)
	fmt.Println(adopted.Target, adopted.Moved, adopted.Reason)

	legacy.PullSecretName = "pull-secret-2"
	next := refresh.NextRolloutTarget(&adopted.Record, legacy, rollout)
	fmt.Println(refresh.HyperShiftConfigHash(legacy), next.Target, next.Moved, next.Reason)
	// Output:
	// 6669fa99 false Adopted the hash split: the target is HyperShift's config hash, as before
	// 2b241fda 6669fa99 false No rollout input changed
}

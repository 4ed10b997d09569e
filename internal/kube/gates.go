package kube

import (
	"context"
	"fmt"
	"os"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// GateSource reads the live feature gates through a client.Reader, on every call, so a change to
// the FeatureGate takes effect without a restart.
type GateSource struct {
	Reader client.Reader
	// ReleaseVersion is the running release version; when empty, ClusterVersion/version
	// status.desired.version is used.
	ReleaseVersion string
}

// Current returns the gates in force now. An error means the gates are unknown and nothing gated
// may act.
func (s GateSource) Current(ctx context.Context) (featuregates.Gates, error) {
	version, err := s.releaseVersion(ctx)
	if err != nil {
		return featuregates.Gates{}, err
	}
	fg := &configv1.FeatureGate{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: "cluster"}, fg); err != nil {
		if apierrors.IsNotFound(err) {
			return featuregates.Gates{}, fmt.Errorf("FeatureGate/cluster not found: feature gates unknown")
		}
		return featuregates.Gates{}, fmt.Errorf("reading FeatureGate/cluster: %w", err)
	}
	return featuregates.FromFeatureGate(fg, version)
}

func (s GateSource) releaseVersion(ctx context.Context) (string, error) {
	if s.ReleaseVersion != "" {
		return s.ReleaseVersion, nil
	}
	cv := &configv1.ClusterVersion{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: "version"}, cv); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("reading ClusterVersion/version: %w", err)
		}
		cv = nil
	}
	return ReleaseVersion("", cv)
}

// ReleaseVersionEnv names the running release in the operator's Deployment, as in the MCO's.
const ReleaseVersionEnv = "RELEASE_VERSION"

// DefaultReleaseVersion is the default of --release-version in both front ends: $RELEASE_VERSION.
func DefaultReleaseVersion() string { return os.Getenv(ReleaseVersionEnv) }

// ReleaseVersion is the release whose feature gates apply, as both front ends choose it: explicit
// (--release-version, by default $RELEASE_VERSION), else ClusterVersion cv's
// status.desired.version; cv is nil when there is none. The error says what is missing.
func ReleaseVersion(explicit string, cv *configv1.ClusterVersion) (string, error) {
	switch {
	case explicit != "":
		return explicit, nil
	case cv == nil:
		return "", fmt.Errorf("release version unknown: no --release-version or %s and ClusterVersion/version not found", ReleaseVersionEnv)
	case cv.Status.Desired.Version == "":
		return "", fmt.Errorf("release version unknown: no --release-version or %s and ClusterVersion/version has no status.desired.version", ReleaseVersionEnv)
	}
	return cv.Status.Desired.Version, nil
}

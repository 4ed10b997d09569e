package kube

import (
	"context"
	"fmt"

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
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("release version unknown: no --release-version or RELEASE_VERSION and ClusterVersion/version not found")
		}
		return "", fmt.Errorf("reading ClusterVersion/version: %w", err)
	}
	if cv.Status.Desired.Version == "" {
		return "", fmt.Errorf("release version unknown: ClusterVersion/version has no status.desired.version")
	}
	return cv.Status.Desired.Version, nil
}

package clusterapi_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

func TestClusterAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "bootimage/clusterapi")
}

// gateSet is the gates named on, and the release's defaults for the others.
type gateSet map[configv1.FeatureGateName]bool

func (g gateSet) Enabled(name configv1.FeatureGateName) bool {
	if v, ok := g[name]; ok {
		return v
	}
	return featuregates.Defaults[name]
}

var ctx = context.Background()

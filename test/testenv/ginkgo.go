package testenv

import (
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Waits are how long Eventually waits in a suite and how often it asks; a zero Polling keeps
// gomega's default.
type Waits struct {
	Timeout, Polling time.Duration
}

// RunSpecs runs t's Ginkgo specs, failing through Ginkgo, with Eventually waiting as waits say.
func RunSpecs(t *testing.T, description string, waits Waits) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	gomega.SetDefaultEventuallyTimeout(waits.Timeout)
	if waits.Polling != 0 {
		gomega.SetDefaultEventuallyPollingInterval(waits.Polling)
	}
	ginkgo.RunSpecs(t, description)
}

// LogToGinkgo sends controller-runtime's log to the GinkgoWriter, shown for a failed spec.
func LogToGinkgo(verbosity int) {
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(ginkgo.GinkgoWriter), textlogger.Verbosity(verbosity))))
}

// StartForSpecs starts a control plane from a Ginkgo setup node (BeforeSuite or BeforeAll) and
// stops it when that node's specs are done.
func StartForSpecs(opts Options) *Env {
	ginkgo.GinkgoHelper()
	env, err := Start(opts)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(env.Stop)
	return env
}

// StartForSpecsChangingCRDs is StartForSpecs with every CRD passed through change before it is
// installed; change returns how many changes it made, and none fails the suite with expected,
// what the suite expects of the shipped CRDs: it would otherwise run on the APIs it means to vary.
func StartForSpecsChangingCRDs(expected string, change func(*apiextensionsv1.CustomResourceDefinition) int) *Env {
	ginkgo.GinkgoHelper()
	changed := 0
	env := StartForSpecs(Options{MutateCRD: func(crd *apiextensionsv1.CustomResourceDefinition) { changed += change(crd) }})
	gomega.Expect(changed).To(gomega.BeNumerically(">", 0), expected)
	return env
}

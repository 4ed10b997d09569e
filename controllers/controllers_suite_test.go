package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
	ctx = context.Background()
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "controllers on a real kube-apiserver")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(GinkgoWriter), textlogger.Verbosity(1))))
	env = testenv.StartForSpecs(testenv.Options{})
	k8s = env.Client
})

// eventNotes returns the messages of the Events with reason, one per occurrence (a repeated
// Event is stored once with a count).
func eventNotes(reason string) func() []string {
	return func() []string {
		list := &corev1.EventList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			for i := int32(0); e.Reason == reason && i < max(e.Count, 1); i++ {
				notes = append(notes, e.Message)
			}
		}
		return notes
	}
}

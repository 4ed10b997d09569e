package steps

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

var _ = Describe("Metrics", func() {
	decision := func(kind, name string, action bootimage.Action, reason, message string) bootimage.Decision {
		return bootimage.Decision{Kind: kind, Namespace: kube.MachineAPINamespace, Name: name, Action: action, Reason: reason, Message: message}
	}

	It("count the tracked decisions by kind, action, reason and OS stream when scraped, Cluster API objects apart", func() {
		tracker := NewTracker()
		capiDecision := func(kind, name string) bootimage.Decision {
			return bootimage.Decision{Kind: kind, APIGroup: string(bootimage.ClusterAPIGroup), Namespace: bootimage.ClusterAPINamespace, Name: name, Action: bootimage.NoChange, Reason: bootimage.ReasonUpToDate}
		}
		tracker.Record(onStream(capiDecision(machineSetKind, "c"), "rhel-9"), "v1")
		tracker.Record(onStream(capiDecision(bootimage.KindMachineDeployment, "d"), "rhel-9"), "v1")
		tracker.Record(onStream(decision(machineSetKind, "a", bootimage.Skip, bootimage.ReasonNotSelected, "not selected"), "rhel-9"), "v1")
		tracker.Record(onStream(decision(machineSetKind, "b", bootimage.Skip, bootimage.ReasonNotSelected, "not selected"), "rhel-9"), "v1")
		tracker.Record(onStream(decision(machineSetKind, "c", bootimage.NoChange, bootimage.ReasonUpToDate, ""), "rhel-9"), "v1")
		tracker.Record(onStream(decision(bootimage.KindControlPlaneMachineSet, "cluster", bootimage.Error, "HotLoopDetected", "reverted three times"), "rhel-9"), "v1")
		rhel10 := decision(machineSetKind, "e", bootimage.Skip, bootimage.ReasonNotSelected, "not selected")
		rhel10.Stream = "rhel-10"
		tracker.Record(rhel10, "v1")
		collector := &decisionCollector{}
		Expect(testutil.CollectAndCount(collector)).To(BeZero(), "nothing before a tracker is set")

		collector.tracker.Store(tracker)
		exported := func(series ...string) error {
			header := "# HELP bootimage_decisions Objects by the operator's current decision for them, by kind (Kind.group for Cluster API objects) and the OS stream their boot image comes from.\n# TYPE bootimage_decisions gauge\n"
			return testutil.CollectAndCompare(collector, strings.NewReader(header+strings.Join(series, "\n")+"\n"), "bootimage_decisions")
		}
		Expect(exported(
			`bootimage_decisions{action="Error",kind="ControlPlaneMachineSet",reason="HotLoopDetected",stream="rhel-9"} 1`,
			`bootimage_decisions{action="NoChange",kind="MachineSet",reason="UpToDate",stream="rhel-9"} 1`,
			`bootimage_decisions{action="NoChange",kind="MachineSet.cluster.x-k8s.io",reason="UpToDate",stream="rhel-9"} 1`,
			`bootimage_decisions{action="NoChange",kind="MachineDeployment.cluster.x-k8s.io",reason="UpToDate",stream="rhel-9"} 1`,
			`bootimage_decisions{action="Skip",kind="MachineSet",reason="NotSelected",stream="rhel-9"} 2`,
			`bootimage_decisions{action="Skip",kind="MachineSet",reason="NotSelected",stream="rhel-10"} 1`,
		)).To(Succeed())

		// The Error is the one outdated object; every Machine API kind has a series.
		Expect(testutil.CollectAndCompare(collector, strings.NewReader(`# HELP bootimage_outdated Selected objects left on an image other than their target: left behind, failing, held after a restore or waiting for a canary (bootimage.Decision.Outdated), by kind (Kind.group for Cluster API objects).
# TYPE bootimage_outdated gauge
bootimage_outdated{kind="ControlPlaneMachineSet"} 1
bootimage_outdated{kind="MachineSet"} 0
`), "bootimage_outdated")).To(Succeed())

		tracker.Forget(machineSetKind, types.NamespacedName{Namespace: kube.MachineAPINamespace, Name: "b"})
		Expect(exported(
			`bootimage_decisions{action="Error",kind="ControlPlaneMachineSet",reason="HotLoopDetected",stream="rhel-9"} 1`,
			`bootimage_decisions{action="NoChange",kind="MachineSet",reason="UpToDate",stream="rhel-9"} 1`,
			`bootimage_decisions{action="NoChange",kind="MachineSet.cluster.x-k8s.io",reason="UpToDate",stream="rhel-9"} 1`,
			`bootimage_decisions{action="NoChange",kind="MachineDeployment.cluster.x-k8s.io",reason="UpToDate",stream="rhel-9"} 1`,
			`bootimage_decisions{action="Skip",kind="MachineSet",reason="NotSelected",stream="rhel-9"} 1`,
			`bootimage_decisions{action="Skip",kind="MachineSet",reason="NotSelected",stream="rhel-10"} 1`,
		)).To(Succeed())
	})

	It("count an Error when a decision becomes one, not on every reconcile", func() {
		metrics := NewMetrics()
		counted := metrics.errorsTotal.WithLabelValues(machineSetKind, bootimage.ReasonInvalidArchitecture)
		before := testutil.ToFloat64(counted)
		tracker := NewTracker()
		recorder := record.NewFakeRecorder(10)
		obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.MachineAPINamespace, Name: "a"}}
		broken := decision(machineSetKind, "a", bootimage.Error, bootimage.ReasonInvalidArchitecture, `names architecture "sparc64"`)

		report(context.Background(), recorder, tracker, metrics, obj, broken, "v1")
		report(context.Background(), recorder, tracker, metrics, obj, broken, "v1")
		Expect(testutil.ToFloat64(counted) - before).To(BeEquivalentTo(1))

		report(context.Background(), recorder, tracker, metrics, obj, decision(machineSetKind, "a", bootimage.NoChange, bootimage.ReasonUpToDate, ""), "v1")
		report(context.Background(), recorder, tracker, metrics, obj, broken, "v1")
		Expect(testutil.ToFloat64(counted) - before).To(BeEquivalentTo(2))
	})

	It("are registered by the caller, twice on two registries, never at import", func() {
		for range 2 {
			registry := prometheus.NewPedanticRegistry()
			for _, c := range NewMetrics().Collectors() {
				Expect(registry.Register(c)).To(Succeed())
			}
		}
		families, err := crmetrics.Registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		for _, f := range families {
			Expect(f.GetName()).NotTo(HavePrefix("bootimage_"))
		}
	})
})

// onStream is d decided on OS stream osStream.
func onStream(d bootimage.Decision, osStream string) bootimage.Decision {
	d.Stream = osStream
	return d
}

package controllers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/capireconciler"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// MachineConfigurationReconciler is the one writer of this operator's part of
// MachineConfiguration/cluster status: it migrates the legacy spec, then computes the effective
// boot image configuration, the skew enforcement status and every condition this operator owns
// from the spec and the tracked decisions, and has the status writer write them together, only
// when they change (package status).
type MachineConfigurationReconciler struct {
	Client     client.Client
	Gates      featuregates.Reader
	Recorder   record.EventRecorder
	Metrics    *Metrics
	Migrations migrations.Runner
	Tracker    *Tracker
	Streams    *inputs.StreamCache
	// Status writes the status and the skew guard.
	Status *status.Writer
	// ClusterOperator, when set, names the ClusterOperator whose Upgradeable condition carries
	// the skew enforcement guard: the reconciler watches it.
	ClusterOperator string
	// Namespace holds the coreos-bootimages ConfigMap.
	Namespace string

	// MachineAPI says which Machine API controllers wait for their CRDs; nil when none do.
	MachineAPI *crdgate.Gate
	// ClusterAPI says which Cluster API controllers wait; nil when none run.
	ClusterAPI *crdgate.Gate
	// ClusterAPIReader reads the Cluster API objects, from the Cluster API controllers' cache.
	ClusterAPIReader client.Reader
	// ClusterAPIProblem says what keeps the Cluster API controllers from running; nil or "" when nothing.
	ClusterAPIProblem func() string
	// Lacking says what the controllers do without (a kind they watch when served that is not,
	// a Machine API controller stopped and retried), and what that means; nil when nothing.
	Lacking func() []string

	// counts holds the progress counts during a wave (status.CountsHold).
	counts status.CountsHold
	// lastWarnings and lastSupport are what was last announced, so each is announced once.
	lastWarnings, lastSupport string

	reg steps.Registration
}

// Reconcile runs the migrations, then writes the status when it changed.
func (r *MachineConfigurationReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	mc := &operatorv1.MachineConfiguration{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: kube.MachineConfigurationName}, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	infra := &configv1.Infrastructure{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Waiting for Infrastructure/cluster: the platform decides the defaults")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	gates, err := r.Gates.Current(ctx)
	if err != nil {
		// The feature gate reporter says why; nothing gated acts meanwhile. A reader that is not
		// the cluster's FeatureGate (the embedder's accessor) becomes ready without any event.
		return ctrl.Result{RequeueAfter: steps.GatesRetry}, nil
	}
	platform := bootimage.PlatformOf(infra)
	if _, err := r.Migrations.Run(ctx, mc, migrations.Cluster{Platform: platform, Gates: gates}); err != nil {
		return ctrl.Result{}, err
	}
	cv, err := inputs.GetOptional(ctx, r.Client, client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{})
	if err != nil {
		return ctrl.Result{}, err
	}
	bootImages, err := inputs.Loader{Reader: r.Client, Namespace: r.Namespace}.BootImages(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}

	// Counted on the version of the selection the status is composed with.
	sel := selection(mc, platform, gates)
	p, unsyncedKinds, err := r.progress(ctx, bootImages, sel)
	if err != nil {
		return ctrl.Result{}, err
	}
	unsynced, unavailable := len(unsyncedKinds) > 0, unsyncedKinds
	if r.Lacking != nil {
		unavailable = append(r.Lacking(), unavailable...)
	}
	problem, err := r.streamProblem(ctx, bootImages, platform)
	if err != nil {
		return ctrl.Result{}, err
	}
	var clusterAPIProblem string
	if r.ClusterAPIProblem != nil {
		clusterAPIProblem = r.ClusterAPIProblem()
	}

	st := composeMachineConfigurationStatus(machineConfigurationInputs{
		MC: mc, Infrastructure: infra, Gates: gates, Selection: sel, MachineAPIMissing: r.MachineAPI.Missing(),
		ClusterVersion: cv, BootImages: bootImages, Progress: p,
		StreamProblem: problem, ClusterAPIProblem: clusterAPIProblem, Unavailable: unavailable, Now: metav1.Now(),
	})
	want, skewOn := st.Want, st.SkewOn
	r.announceSupport(ctx, want)
	requeue := r.counts.Hold(mc.Status.Conditions, want.Status.Conditions)
	r.announce(ctx, mc, st.Warnings)
	if held, wait, err := r.Status.Write(ctx, mc, want, skewOn); err != nil || held {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	guard := bootimage.SkewGuard{}
	if skewOn {
		guard = bootimage.EvaluateSkewGuard(want.Status)
	}
	r.Metrics.SetDegraded(meta.IsStatusConditionTrue(want.Status.Conditions, status.ConditionBootImageUpdateDegraded))
	r.Metrics.SetUpgradeBlocked(guard.Blocked)
	if err := r.Status.ReportGuard(ctx, mc, guard, p.LeftBehind()); err != nil {
		return ctrl.Result{}, err
	}
	if unsynced {
		// A cache that has not synced says nothing when it does: look again.
		return withRequeue(ctrl.Result{RequeueAfter: requeue}, unsyncedRetry), nil
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// inputErrors are the warnings that are errors of the cluster's inputs, logged as errors.
var inputErrors = map[string]bool{bootimage.ReasonInvalidStream: true, bootimage.ReasonStreamMissing: true}

// warning is a problem of the cluster's inputs, said once on MachineConfiguration/cluster: in
// Degraded or ConfigurationDegraded, and as a Warning Event with reason.
type warning struct{ reason, message string }

func problemWarnings(problems []string) []warning {
	out := make([]warning, len(problems))
	for i, p := range problems {
		out[i] = warning{status.ReasonInvalidSelection, p}
	}
	return out
}

func messages(ws []warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.message
	}
	return out
}

// announce records a Warning Event for each configuration problem or warning when the set of
// them changes: each is said once, however many objects it holds back.
func (r *MachineConfigurationReconciler) announce(ctx context.Context, mc *operatorv1.MachineConfiguration, warnings []warning) {
	joined := strings.Join(messages(warnings), "; ")
	if joined == r.lastWarnings {
		return
	}
	r.lastWarnings = joined
	for _, w := range warnings {
		if inputErrors[w.reason] {
			logf.FromContext(ctx).Error(errors.New(w.message), "Boot image input is broken", "reason", w.reason)
		} else {
			logf.FromContext(ctx).Info("Boot image configuration needs attention", "reason", w.reason, "message", w.message)
		}
		r.Recorder.Event(mc, corev1.EventTypeWarning, w.reason, w.message)
	}
}

// announceSupport logs once each time boot image management becomes unavailable, or available again.
func (r *MachineConfigurationReconciler) announceSupport(ctx context.Context, mc *operatorv1.MachineConfiguration) {
	cond := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateSupported)
	if cond == nil || cond.Message == r.lastSupport {
		return
	}
	r.lastSupport = cond.Message
	if cond.Status == metav1.ConditionFalse {
		logf.FromContext(ctx).Info("Boot image updates are off", "reason", cond.Reason, "message", cond.Message)
	} else {
		logf.FromContext(ctx).Info("Boot image updates are supported on this cluster")
	}
}

// streamProblem says what is wrong with the stream itself: missing, unreadable, or without the
// cluster's own architecture or platform. It is the same for every object, so it is said here
// once rather than by each object's decision. A failed Node list is returned, not taken for "no
// problem".
func (r *MachineConfigurationReconciler) streamProblem(ctx context.Context, bootImages *corev1.ConfigMap, platform configv1.PlatformType) (warning, error) {
	if bootImages == nil {
		return warning{bootimage.ReasonStreamMissing, bootimage.StreamMissingMessage}, nil
	}
	streams, err := r.Streams.Parse(bootImages)
	if err != nil {
		return warning{bootimage.ReasonInvalidStream, err.Error()}, nil
	}
	arch, err := inputs.ControlPlaneArch(ctx, r.Client)
	if err != nil {
		return warning{}, err
	}
	problem := bootimage.StreamProblem(streams, platform, arch)
	// An entry of streams that does not parse errs the objects of its OS stream only, but it is
	// broken input all the same: said here, as bootimagectl plan says it, whether or not an
	// object boots that stream.
	if len(streams.Invalid) > 0 {
		var invalid []string
		for _, name := range slices.Sorted(maps.Keys(streams.Invalid)) {
			invalid = append(invalid, streams.Invalid[name].Error())
		}
		if problem != "" {
			invalid = append(invalid, problem)
		}
		return warning{bootimage.ReasonInvalidStream, strings.Join(invalid, "; ")}, nil
	}
	return warning{status.ReasonInvalidSelection, problem}, nil
}

// unsyncedRetry is how soon the status is composed again while a cache it reads has not synced.
const unsyncedRetry = 30 * time.Second

// uncountedList lists into list; a kind not served has no objects, and one whose cache has not
// synced is said, in uncounted, and not counted rather than waited for.
func (r *MachineConfigurationReconciler) uncountedList(ctx context.Context, c client.Reader, list client.ObjectList, namespace, what string, uncounted *[]string) error {
	// Only the keys are read: the cached objects, not copies.
	err := c.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy)
	if crdgate.IsNotSynced(err) {
		*uncounted = append(*uncounted, what+" are not counted: "+err.Error())
		return nil
	}
	if meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// progress tallies the current decisions of the listed objects taken on the inputs of the
// selection sel, and says which kinds it could not read, their caches not synced.
func (r *MachineConfigurationReconciler) progress(ctx context.Context, bootImages *corev1.ConfigMap, sel bootimage.Effective) (status.Progress, []string, error) {
	var p status.Progress
	var uncounted []string
	pools, osImageStream, err := kube.OSStreamInputs(ctx, r.Client)
	if crdgate.IsNotSynced(err) {
		// Counted without them; the decisions wait for them.
		uncounted = append(uncounted, "OS streams cannot be read: "+err.Error())
	} else if err != nil {
		return p, nil, err
	}
	osStreams := bootimage.NewCluster(bootimage.ClusterObjects{Pools: pools, OSImageStream: osImageStream}).OSStreamsKey()
	version := inputs.Version(bootImages, sel.Status, osStreams)
	// A kind whose controller does not run is not listed: its CRD may not be served.
	sets := &machinev1beta1.MachineSetList{}
	if !r.MachineAPI.Waiting(bootimage.KindMachineSet) {
		if err := r.uncountedList(ctx, r.Client, sets, kube.MachineAPINamespace, "MachineSets", &uncounted); err != nil {
			return p, nil, err
		}
	}
	cpmsList := &machinev1.ControlPlaneMachineSetList{}
	if !r.MachineAPI.Waiting(cpmsKind) {
		if err := r.uncountedList(ctx, r.Client, cpmsList, kube.MachineAPINamespace, "ControlPlaneMachineSets", &uncounted); err != nil {
			return p, nil, err
		}
	}
	p.MachineSets.Total = len(sets.Items)
	msDecisions := r.Tracker.Decisions(bootimage.KindMachineSet, version)
	for _, ms := range sets.Items {
		if d, ok := msDecisions[client.ObjectKeyFromObject(&ms)]; ok {
			p.Add(d)
		}
	}
	p.ControlPlaneMachineSets.Total = len(cpmsList.Items)
	cpmsDecisions := r.Tracker.Decisions(bootimage.KindControlPlaneMachineSet, version)
	for _, c := range cpmsList.Items {
		if d, ok := cpmsDecisions[client.ObjectKeyFromObject(&c)]; ok {
			p.Add(d)
		}
	}
	for _, kind := range []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment} {
		if r.ClusterAPI == nil || r.ClusterAPI.Waiting(capireconciler.ClusterAPIKind(kind)) {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(kind + "List"))
		if err := r.uncountedList(ctx, r.ClusterAPIReader, list, bootimage.ClusterAPINamespace, "Cluster API "+kind+"s", &uncounted); err != nil {
			return p, nil, err
		}
		p.ClusterAPI.Total += len(list.Items)
		decisions := r.Tracker.Decisions(kind, version)
		for i := range list.Items {
			if d, ok := decisions[client.ObjectKeyFromObject(&list.Items[i])]; ok {
				p.Add(d)
			}
		}
	}
	return p, uncounted, nil
}

// releaseVersion is coreos-bootimages' releaseVersion, "" without the ConfigMap.
func releaseVersion(bootImages *corev1.ConfigMap) string {
	if bootImages == nil {
		return ""
	}
	return bootImages.Data["releaseVersion"]
}

// installVersion returns the release of the oldest Completed update: the one installed; "" when
// unknown.
func installVersion(cv *configv1.ClusterVersion) string {
	if cv == nil {
		return ""
	}
	for i := len(cv.Status.History) - 1; i >= 0; i-- {
		if cv.Status.History[i].State == configv1.CompletedUpdate {
			return cv.Status.History[i].Version
		}
	}
	return ""
}

// SetupWithManager registers the reconciler; any change of its inputs, and any change of a
// tracked decision, re-runs it.
func (r *MachineConfigurationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: kube.MachineConfigurationName}}}
	})
	// One worker: the reconciler and its status writer hold what they last announced and wrote,
	// unguarded; every request is the one singleton key anyway.
	b := r.reg.Controller(mgr, "machineconfiguration", "", controller.Options{MaxConcurrentReconciles: 1}).
		Watches(&operatorv1.MachineConfiguration{}, toSingleton, builder.WithPredicates(steps.Named("", kube.MachineConfigurationName))).
		Watches(&configv1.Infrastructure{}, toSingleton, builder.WithPredicates(steps.Changed(func(o, n *configv1.Infrastructure) bool { return equality.Semantic.DeepEqual(o.Status, n.Status) }))).
		Watches(&configv1.FeatureGate{}, toSingleton, builder.WithPredicates(steps.Changed(func(o, n *configv1.FeatureGate) bool { return equality.Semantic.DeepEqual(o.Status, n.Status) }))).
		Watches(&configv1.ClusterVersion{}, toSingleton, builder.WithPredicates(steps.ClusterVersionChanged())).
		Watches(&corev1.ConfigMap{}, toSingleton, builder.WithPredicates(steps.Named(r.Namespace, kube.BootImagesConfigMapName))).
		WatchesRawSource(source.Channel(r.Tracker.Changed, toSingleton))
	if r.ClusterOperator != "" {
		b = b.Watches(&configv1.ClusterOperator{}, toSingleton, builder.WithPredicates(steps.Named("", r.ClusterOperator)))
	}
	return b.Complete(r)
}

// withRequeue returns res coming back after at most after (0: as res says).
func withRequeue(res ctrl.Result, after time.Duration) ctrl.Result {
	if after > 0 && (res.RequeueAfter == 0 || after < res.RequeueAfter) {
		res.RequeueAfter = after
	}
	return res
}

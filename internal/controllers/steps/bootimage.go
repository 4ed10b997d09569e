// Package steps holds what the boot image reconcilers of both families share: the Machine API
// ones (package controllers) and the Cluster API ones (package capireconciler). BootImages carries
// the steps each takes for one object (decide, copy an AMI, import a vSphere template, verify and
// restore, write, report); the Tracker and each object's memory, the metrics, the cluster inputs'
// loader, the watches of those inputs and the controllers' registration are here too. It exports
// only what those two packages use.
package steps

import (
	"cmp"
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/internal/vsphereimport"
)

// Cloud timings. A lookup that fails is retried when the cloud adapter's failure backoff says
// (cloud.Backoff; else with the controller's backoff); once it has failed for CloudErrorGrace the
// object is an Error CloudLookupFailed, retried at that backoff and at least every
// CloudRetryInterval until it works. Skips that only the cloud can lift (an image not yet
// available or replicated) are re-checked every CloudRecheckInterval. Specs shorten them through
// internal/seams.
const (
	DefaultCloudErrorGrace      = bootimage.CloudErrorGrace
	DefaultCloudRetryInterval   = time.Minute
	DefaultCloudRecheckInterval = 30 * time.Minute
)

// BootImages are what every boot image reconciler shares, and the steps each takes for one object:
// decide, import a vSphere template when due, write an update, report.
type BootImages struct {
	Client client.Client
	// Reader reads from the API server, for the managed fields the cache drops.
	Reader   client.Reader
	Inputs   ClusterInputs
	Recorder record.EventRecorder
	Tracker  *Tracker
	Metrics  *Metrics
	Clock    clock.PassiveClock
	// Templates imports vSphere templates before a vSphere update is patched in.
	Templates *vsphereimport.Imports
	// AMICopies are the AMI copies announced.
	AMICopies *CopyLog

	Registration Registration
}

// MachineSetWorkers decide and patch MachineSets in parallel: a patch waits on the API server,
// so a few in flight keep it busy without piling up. The reconciler holds no state of its own:
// what it remembers of each object is in the Tracker, under its lock, and the work queue hands a
// MachineSet to one worker at a time, so reading an object's memory and storing the next one
// cannot interleave with another worker's for that object. The template imports lock their own.
const MachineSetWorkers = 8

// cloudTimings are the cloud retry timings in force.
type cloudTimings struct {
	errorGrace, retryInterval, recheckInterval time.Duration
}

// timings returns the default cloud timings, or those a spec's seams in ctx set.
func timings(ctx context.Context) cloudTimings {
	h := seams.From(ctx)
	return cloudTimings{
		errorGrace:      cmp.Or(h.CloudErrorGrace, DefaultCloudErrorGrace),
		retryInterval:   cmp.Or(h.CloudRetryInterval, DefaultCloudRetryInterval),
		recheckInterval: cmp.Or(h.CloudRecheckInterval, DefaultCloudRecheckInterval),
	}
}

// ObjectReconciler gets the object of a request and hands it to a typed Reconcile; an object
// gone is forgotten by the tracker, and handed to gone when set.
type ObjectReconciler[T client.Object] struct {
	Client          client.Reader
	Tracker         *Tracker
	Kind            string
	NewObject       func() T
	ReconcileObject func(context.Context, T) (ctrl.Result, error)
	Gone            func(context.Context, types.NamespacedName) (ctrl.Result, error)
}

// Reconcile implements reconcile.Reconciler.
func (o ObjectReconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	obj := o.NewObject()
	if err := o.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			o.Tracker.Forget(o.Kind, req.NamespacedName)
			if o.Gone != nil {
				return o.Gone(ctx, req.NamespacedName)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return o.ReconcileObject(ctx, obj)
}

// Decide takes the decision for obj, reduced from live, with the attempts to record if it is
// patched. When a cloud lookup the decision needs fails it returns, instead, the result that takes
// it again (see cloudFailed).
func (s BootImages) Decide(ctx context.Context, in LoadedInputs, live client.Object, obj *bootimage.Object) (bootimage.Decision, bootimage.Attempts, *ctrl.Result, error) {
	key := client.ObjectKeyFromObject(live)
	var err error
	if obj.UserData, err = userData(ctx, s.Client, obj.ProviderSpec); err != nil {
		return bootimage.Decision{}, bootimage.Attempts{}, nil, err
	}
	m := s.Tracker.Memory(obj.Kind, key)
	m.into(obj)
	d, err := bootimage.Decide(ctx, in.Cluster, *obj)
	if err != nil {
		res, err := s.cloudFailed(ctx, in, live, *obj, d, err)
		return d, bootimage.Attempts{}, &res, err
	}
	s.Tracker.Remember(obj.Kind, key, m.cloudWorks().decided(d))
	if d.Reason == bootimage.ReasonHotLoopDetected {
		d.Message = status.WithSecondWriter(ctx, s.Reader, live, d.Message)
	}
	return d, obj.NextAttempts(in.Cluster, d.Target), nil, nil
}

// cloudFailed handles a cloud lookup of live's decision d that failed with err. A remembered cloud
// failure says when the call may be sent again: come back then, not sooner, and not through the
// controller's per-object backoff, which starts at 5ms. Once the lookups have failed for the grace
// period, d is an Error CloudLookupFailed, taken again at that backoff and at least every retry
// interval.
func (s BootImages) cloudFailed(ctx context.Context, in LoadedInputs, live client.Object, obj bootimage.Object, d bootimage.Decision, err error) (ctrl.Result, error) {
	if ctx.Err() != nil {
		// This caller gave up (shutdown): no cloud failure, nothing to count.
		return ctrl.Result{}, ctx.Err()
	}
	retry, remembered := cloud.RetryAfter(err)
	t := timings(ctx)
	key := client.ObjectKeyFromObject(live)
	m, failing := s.Tracker.Memory(obj.Kind, key).cloudFailed(s.Clock.Now())
	s.Tracker.Remember(obj.Kind, key, m)
	if failing < t.errorGrace {
		if !remembered {
			return ctrl.Result{}, err // the controller's backoff retries it
		}
		logf.FromContext(ctx).V(1).Info("Cloud lookup failed, retrying", "retryAfter", retry.String(), "error", err.Error())
		return ctrl.Result{RequeueAfter: max(retry, time.Millisecond)}, nil
	}
	logf.FromContext(ctx).V(1).Info("Cloud lookup keeps failing", "failingFor", failing.Round(time.Second).String(), "error", err.Error())
	reportFailure(ctx, s.Recorder, s.Tracker, s.Metrics, live, bootimage.CloudLookupFailed(d, err), in.Version, cloud.FailureKey(err))
	if !remembered {
		retry = t.retryInterval
	}
	return ctrl.Result{RequeueAfter: max(min(retry, t.retryInterval), time.Millisecond)}, nil
}

// Update writes the upgraded user-data stub, if any, over the Secret read decided on, then patch,
// the boot image, each with optimistic locking; a conflict is returned so the object is decided
// again on fresh data.
func (s BootImages) Update(ctx context.Context, live client.Object, read *bootimage.UserData, d bootimage.Decision, next bootimage.Attempts, patch []byte) error {
	key := client.ObjectKeyFromObject(live)
	if d.UserData != nil {
		if read == nil {
			return fmt.Errorf("%s %s: an upgraded user-data stub without the Secret it was computed from", d.Kind, key)
		}
		if err := upgradeUserData(ctx, s.Client, s.Recorder, s.Clock.Now(), key.Namespace, read, d); err != nil {
			return err
		}
	}
	if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(status.FieldManager)); err != nil {
		group := machinev1beta1.GroupName
		if d.APIGroup != "" {
			group = string(d.APIGroup)
		}
		rule := status.Rule{Verb: "patch", Group: group, Resource: resourceOf(d.Kind), Namespace: key.Namespace}
		return fmt.Errorf("patching boot image of %s %s: %w", d.Kind, key, status.Forbidden(err, rule))
	}
	s.Tracker.Remember(d.Kind, key, s.Tracker.Memory(d.Kind, key).patch(next))
	s.Metrics.countUpdate(d)
	s.Templates.Recorded(vsphereimport.Waiter{Kind: d.Kind, Name: key})
	logf.FromContext(ctx).Info("Updated boot image", "from", d.Current, "to", d.Target)
	if d.Rolls != nil {
		// A MachineDeployment replaces every Machine it owns when its template changes.
		s.Recorder.Eventf(live, corev1.EventTypeNormal, ReasonBootImageUpdated, "Updated boot image from %s to %s; rolls %d machines", d.Current, d.Target, *d.Rolls)
	} else {
		s.Recorder.Eventf(live, corev1.EventTypeNormal, ReasonBootImageUpdated, "Updated boot image from %s to %s", d.Current, d.Target)
	}
	return nil
}

// GatesRetry is how soon a reconcile that found the feature gates unknown looks again: a reader
// other than FeatureGate/cluster (library-go's accessor, the MCO's handler) becomes ready without
// any event this operator watches.
const GatesRetry = 10 * time.Second

// WhileGatesUnknown has a decision taken without the feature gates taken again soon (GatesRetry).
func (s BootImages) WhileGatesUnknown(in LoadedInputs, res ctrl.Result) ctrl.Result {
	if in.Cluster.GatesError != nil && (res.RequeueAfter == 0 || res.RequeueAfter > GatesRetry) {
		res.RequeueAfter = GatesRetry
	}
	return res
}

// resourceOf is the resource RBAC names for kind.
func resourceOf(kind string) string {
	switch kind {
	case bootimage.KindMachineSet:
		return "machinesets"
	case bootimage.KindMachineDeployment:
		return "machinedeployments"
	}
	return "controlplanemachinesets"
}

// Forbidden turns a write refused for want of an RBAC rule into a Warning Event on live naming the
// rule, and a look again after status.ForbiddenRetry; other errors are returned as they are.
func (s BootImages) Forbidden(ctx context.Context, live client.Object, err error) (ctrl.Result, error) {
	f := status.AsForbidden(err)
	if f == nil {
		return ctrl.Result{}, err
	}
	logf.FromContext(ctx).Error(err, "Cannot update boot image", "verb", f.Rule.Verb, "resource", f.Rule.Resource)
	s.Recorder.Event(live, corev1.EventTypeWarning, status.ReasonForbidden, f.Error())
	return ctrl.Result{RequeueAfter: status.ForbiddenRetry}, nil
}

// Done reports d and says when to look again (see lasting).
func (s BootImages) Done(ctx context.Context, live client.Object, d bootimage.Decision, inputs string) ctrl.Result {
	d, recheck := s.lasting(ctx, timings(ctx), d.Kind, client.ObjectKeyFromObject(live), d)
	report(ctx, s.Recorder, s.Tracker, s.Metrics, live, d, inputs)
	s.Metrics.markReconciled(s.Clock.Now())
	return ctrl.Result{RequeueAfter: recheck}
}

// lasting turns a stream target the cloud has kept unavailable for longer than the cloud grace
// period into an Error, which degrades, and says when to look again: within the grace period at
// its end, then every retry interval until the image appears; other cloud-dependent skips at the
// recheck interval. A clock this process has not started yet starts where the cluster's Events
// say the decision was first taken (kube.FirstSaid), as bootimagectl plan reads it, so a restart
// neither restarts the grace period nor disagrees with the plan.
func (s BootImages) lasting(ctx context.Context, t cloudTimings, kind string, key types.NamespacedName, d bootimage.Decision) (bootimage.Decision, time.Duration) {
	memory := s.Tracker.Memory(kind, key)
	if d.Action == bootimage.Skip && d.Reason == bootimage.ReasonTargetImageUnavailable && memory.unavailable != d.Target {
		if since, err := kube.FirstSaid(ctx, s.Reader, d); err == nil && !since.IsZero() && since.Before(s.Clock.Now()) {
			memory.unavailable, memory.unavailableSince = d.Target, since
		} else if err != nil {
			logf.FromContext(ctx).Error(err, "Cannot read when the target was first unavailable; the cloud grace period starts now")
		}
	}
	memory, lasted := memory.targetUnavailable(d, s.Clock.Now())
	s.Tracker.Remember(kind, key, memory)
	if d.Action != bootimage.Skip || d.Reason != bootimage.ReasonTargetImageUnavailable {
		if d.CloudDependent() {
			return d, t.recheckInterval
		}
		return d, 0
	}
	if lasted < t.errorGrace {
		return d, min(t.errorGrace-lasted, t.recheckInterval)
	}
	return bootimage.TargetUnavailableTooLong(d, t.errorGrace), t.retryInterval
}

// OrZero is the result r points at; none (done, no requeue) when r is nil.
func OrZero(r *ctrl.Result) ctrl.Result {
	if r == nil {
		return ctrl.Result{}
	}
	return *r
}

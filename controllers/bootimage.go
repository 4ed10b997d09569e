package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Cloud timings. A lookup that fails is retried with the controller's backoff; once it has failed
// for CloudErrorGrace the object is an Error CloudLookupFailed, retried every CloudRetryInterval
// until it works. Skips that only the cloud can lift (an image not yet available or replicated)
// are re-checked every CloudRecheckInterval.
const (
	DefaultCloudErrorGrace      = 3 * time.Minute
	DefaultCloudRetryInterval   = time.Minute
	DefaultCloudRecheckInterval = 30 * time.Minute
)

// bootImages are what every boot image reconciler shares, and the steps each takes for one object:
// decide, import a vSphere template when due, write an update, report.
type bootImages struct {
	Client client.Client
	// Reader reads from the API server, for the managed fields the cache drops.
	Reader   client.Reader
	Inputs   clusterInputs
	Recorder record.EventRecorder
	Tracker  *Tracker
	Timings  CloudTimings
	// Templates imports vSphere templates before a vSphere update is patched in.
	Templates *TemplateImporter
}

// CloudTimings are the cloud retry timings; zero fields take the defaults.
type CloudTimings struct {
	ErrorGrace, RetryInterval, RecheckInterval time.Duration
}

func (c CloudTimings) withDefaults() CloudTimings {
	if c.ErrorGrace == 0 {
		c.ErrorGrace = DefaultCloudErrorGrace
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultCloudRetryInterval
	}
	if c.RecheckInterval == 0 {
		c.RecheckInterval = DefaultCloudRecheckInterval
	}
	return c
}

// objectReconciler gets the object of a request and hands it to a typed Reconcile; an object
// gone is forgotten by the tracker.
type objectReconciler[T client.Object] struct {
	client    client.Client
	tracker   *Tracker
	kind      string
	newObject func() T
	reconcile func(context.Context, T) (ctrl.Result, error)
}

func (o objectReconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	obj := o.newObject()
	if err := o.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			o.tracker.Forget(o.kind, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return o.reconcile(ctx, obj)
}

// decide takes the decision for obj, reduced from live, with the attempts to record if it is
// patched. A cloud lookup that fails is returned as an error, for the controller's backoff, until
// it has failed for the grace period; then it is an Error CloudLookupFailed decision.
func (s bootImages) decide(ctx context.Context, in loadedInputs, live client.Object, obj bootimage.Object) (bootimage.Decision, bootimage.Attempts, error) {
	key := client.ObjectKeyFromObject(live)
	var err error
	if obj.UserData, err = userData(ctx, s.Client, obj.ProviderSpec); err != nil {
		return bootimage.Decision{}, bootimage.Attempts{}, err
	}
	selection := bootimage.SelectionKey(in.cluster.Effective, obj.Resource)
	persisted := bootimage.ParseAttempts(live.GetAnnotations())
	obj.Attempts = s.Tracker.Attempts(obj.Kind, key, persisted, selection)
	d, err := bootimage.Decide(ctx, in.cluster, obj)
	if err != nil {
		failing := s.Tracker.CloudFailing(obj.Kind, key, time.Now())
		if failing < s.Timings.ErrorGrace {
			return d, bootimage.Attempts{}, err
		}
		logf.FromContext(ctx).Info("Cloud lookup keeps failing", "kind", obj.Kind, "name", key, "failingFor", failing.Round(time.Second).String(), "error", err.Error())
		return bootimage.CloudLookupFailed(d, err), bootimage.Attempts{}, nil
	}
	s.Tracker.CloudWorks(obj.Kind, key)
	if d.Reason == bootimage.ReasonHotLoopDetected {
		d.Message = withSecondWriter(ctx, s.Reader, live, d.Message)
	}
	return d, s.Tracker.NextAttempts(obj.Kind, key, persisted, d.Target, selection), nil
}

// update writes the upgraded user-data stub, if any, into Secret userDataSecret, then patch, the
// boot image, each with optimistic locking; a conflict is returned so the object is decided again
// on fresh data.
func (s bootImages) update(ctx context.Context, live client.Object, userDataSecret string, d bootimage.Decision, next bootimage.Attempts, patch []byte) error {
	key := client.ObjectKeyFromObject(live)
	if d.UserData != nil {
		if err := upgradeUserData(ctx, s.Client, s.Recorder, key.Namespace, userDataSecret, d); err != nil {
			return err
		}
	}
	if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("patching boot image of %s %s: %w", d.Kind, key, err)
	}
	s.Tracker.Patched(d.Kind, key, next)
	countUpdate(d.Kind)
	logf.FromContext(ctx).Info("Updated boot image", "kind", d.Kind, "name", key, "from", d.Current, "to", d.Target)
	s.Recorder.Eventf(live, corev1.EventTypeNormal, ReasonBootImageUpdated, "Updated boot image from %s to %s", d.Current, d.Target)
	return nil
}

// done reports d and says when to look again: failed cloud lookups and cloud-dependent skips are
// taken again on a timer.
func (s bootImages) done(ctx context.Context, live client.Object, d bootimage.Decision, inputs string) ctrl.Result {
	report(ctx, s.Recorder, s.Tracker, live, d, inputs)
	if d.Reason == bootimage.ReasonCloudLookupFailed {
		return ctrl.Result{RequeueAfter: s.Timings.RetryInterval}
	}
	markReconciled()
	if d.CloudDependent() {
		return ctrl.Result{RequeueAfter: s.Timings.RecheckInterval}
	}
	return ctrl.Result{}
}

package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
)

// Cloud timings. A lookup that fails is retried when the cloud adapter's failure backoff says
// (cloud.Backoff; else with the controller's backoff); once it has failed for CloudErrorGrace the
// object is an Error CloudLookupFailed, retried at that backoff and at least every
// CloudRetryInterval until it works. Skips that only the cloud can lift (an image not yet available or replicated)
// are re-checked every CloudRecheckInterval.
const (
	DefaultCloudErrorGrace      = 3 * time.Minute
	DefaultCloudRetryInterval   = time.Minute
	DefaultCloudRecheckInterval = 30 * time.Minute
)

// bootImageSteps are the steps every boot image reconciler takes for one object: read the
// cluster, decide, write an update, report. The MachineSet and CPMS reconcilers differ only in
// how they reduce their object, refine the decision and build the patch.
type bootImageSteps struct {
	Client client.Client
	// Reader reads from the API server, for the managed fields the cache drops.
	Reader   client.Reader
	Inputs   clusterInputs
	Recorder record.EventRecorder
	Tracker  *Tracker
	Timings  CloudTimings
	Metrics  *Metrics
	Clock    clock.PassiveClock
	// Templates imports vSphere templates before a vSphere update is patched in.
	Templates *TemplateImports
	// Unavailable times stream targets the cloud does not have.
	Unavailable *lastingSkips

	reg registration
}

// CloudTimings are the cloud retry timings; zero fields take the defaults.
type CloudTimings struct {
	ErrorGrace, RetryInterval, RecheckInterval time.Duration
	// Backoff is how long the cloud adapters remember a failed call (see cloud.Backoff).
	Backoff cloud.Backoff
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

// target is one object to reconcile.
type target struct {
	// live is the object as read from the API, which the patch is sent for.
	live client.Object
	// reduced is live reduced to what decisions read.
	reduced bootimage.Object
	// refine, when set, applies the object's own rules to the shared decision.
	refine func(bootimage.Decision, bootimage.Attempts) bootimage.Decision
	// patch builds the JSON Patch of an update, with the attempts to record.
	patch func(bootimage.Decision, bootimage.Attempts) ([]byte, error)
}

func (s bootImageSteps) reconcile(ctx context.Context, t target) (ctrl.Result, error) {
	in, ready, err := s.Inputs.load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: t.live.GetNamespace(), Name: t.live.GetName()}
	if t.reduced.UserData, err = userData(ctx, s.Client, t.reduced.ProviderSpec); err != nil {
		return ctrl.Result{}, err
	}
	kind := t.reduced.Kind
	selection := bootimage.SelectionKey(in.cluster.Effective, t.reduced.Resource)
	persisted := bootimage.ParseAttempts(t.live.GetAnnotations())
	t.reduced.Attempts = s.Tracker.Attempts(kind, key, persisted, selection)
	d, err := bootimage.Decide(ctx, in.cluster, t.reduced)
	if err != nil {
		if ctx.Err() != nil {
			// This caller gave up (shutdown): no cloud failure, nothing to count.
			return ctrl.Result{}, ctx.Err()
		}
		// A remembered cloud failure says when the call may be sent again: come back then, not
		// sooner, and not through the controller's per-object backoff, which starts at 5ms.
		retry, remembered := cloud.RetryAfter(err)
		failing := s.Tracker.CloudFailing(kind, key, s.Clock.Now())
		if failing < s.Timings.ErrorGrace {
			if !remembered {
				return ctrl.Result{}, err // the controller's backoff retries it
			}
			logf.FromContext(ctx).V(1).Info("Cloud lookup failed, retrying", "retryAfter", retry.String(), "error", err.Error())
			return ctrl.Result{RequeueAfter: max(retry, time.Millisecond)}, nil
		}
		logf.FromContext(ctx).V(1).Info("Cloud lookup keeps failing", "failingFor", failing.Round(time.Second).String(), "error", err.Error())
		reportFailure(ctx, s.Recorder, s.Tracker, s.Metrics, t.live, bootimage.CloudLookupFailed(d, err), in.version, cloud.FailureKey(err))
		if !remembered {
			retry = s.Timings.RetryInterval
		}
		return ctrl.Result{RequeueAfter: max(min(retry, s.Timings.RetryInterval), time.Millisecond)}, nil
	}
	s.Tracker.CloudWorks(kind, key)
	next := s.Tracker.NextAttempts(kind, key, persisted, d.Target, selection)
	if t.refine != nil {
		d = t.refine(d, next)
	}
	if d.Reason == bootimage.ReasonHotLoopDetected {
		d.Message = withSecondWriter(ctx, s.Reader, t.live, d.Message)
	}
	d, wait := s.vsphereImport(ctx, t, key, d, in.version)
	if wait != nil {
		return *wait, nil
	}
	if d.Action == bootimage.Update {
		if err := s.update(ctx, t, key, d, next); err != nil {
			return ctrl.Result{}, err
		}
		s.Templates.recorded(waiter{kind, key})
	}
	d, recheck := s.lasting(kind, key, d)
	report(ctx, s.Recorder, s.Tracker, s.Metrics, t.live, d, in.version)
	s.Metrics.markReconciled(s.Clock.Now())
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// lasting turns a stream target the cloud has kept unavailable for longer than the cloud grace
// period into an Error, which degrades, and says when to look again: within the grace period at
// its end, then every retry interval until the image appears; other cloud-dependent skips at the
// recheck interval.
func (s bootImageSteps) lasting(kind string, key types.NamespacedName, d bootimage.Decision) (bootimage.Decision, time.Duration) {
	if d.Action != bootimage.Skip || d.Reason != bootimage.ReasonTargetImageUnavailable {
		s.Unavailable.clear(kind, key)
		if d.CloudDependent() {
			return d, s.Timings.RecheckInterval
		}
		return d, 0
	}
	lasted := s.Unavailable.unavailable(kind, key, d.Target, s.Clock.Now())
	if lasted < s.Timings.ErrorGrace {
		return d, min(s.Timings.ErrorGrace-lasted, s.Timings.RecheckInterval)
	}
	return bootimage.TargetUnavailableTooLong(d, s.Timings.ErrorGrace), s.Timings.RetryInterval
}

// update writes the upgraded user-data stub, if any, then the boot image, each with optimistic
// locking; a conflict is returned so the object is decided again on fresh data.
func (s bootImageSteps) update(ctx context.Context, t target, key types.NamespacedName, d bootimage.Decision, next bootimage.Attempts) error {
	if d.UserData != nil {
		if err := upgradeUserData(ctx, s.Client, s.Recorder, s.Clock.Now(), key.Namespace, bootimage.UserDataSecretName(t.reduced.ProviderSpec), d); err != nil {
			return err
		}
	}
	patch, err := t.patch(d, next)
	if err != nil {
		return err
	}
	if err := s.Client.Patch(ctx, t.live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("patching boot image of %s %s: %w", d.Kind, key, err)
	}
	s.Tracker.Patched(d.Kind, key, next)
	s.Metrics.countUpdate(d.Kind)
	logf.FromContext(ctx).Info("Updated boot image", "from", d.Current, "to", d.Target)
	s.Recorder.Eventf(t.live, corev1.EventTypeNormal, ReasonBootImageUpdated, "Updated boot image from %s to %s", d.Current, d.Target)
	return nil
}

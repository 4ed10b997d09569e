package steps

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// report records d, taken on inputs, and, when it changed, says so in an Event and the log: every
// skip and error once, not again while nothing changes.
func report(ctx context.Context, recorder record.EventRecorder, tracker *Tracker, metrics *Metrics, obj client.Object, d bootimage.Decision, inputs string) {
	reportFailure(ctx, recorder, tracker, metrics, obj, d, inputs, "")
}

// reportFailure is report for an Error caused by the fault cause (cloud.FailureKey): the same
// fault is said once, however often it recurs, and counted once in bootimage_errors_total.
func reportFailure(ctx context.Context, recorder record.EventRecorder, tracker *Tracker, metrics *Metrics, obj client.Object, d bootimage.Decision, inputs, cause string) {
	changed, noteChanged := tracker.RecordFailure(d, inputs, cause)
	// The request's logger already names the object, as controller-runtime logs it.
	log := logf.FromContext(ctx).WithValues("reason", d.Reason)
	if noteChanged && d.StreamNote != "" {
		log.Info("OS stream disagreement", "osStream", d.Stream, "message", d.StreamNote)
		message := "The boot image comes from OS stream " + d.Stream + ", but " + d.StreamNote
		if d.Reason == bootimage.ReasonOSStreamNotInBootImages {
			message = "It " + d.StreamWarning()
		}
		recorder.Event(obj, corev1.EventTypeWarning, bootimage.ReasonOSStreamMismatch, message)
	}
	if !changed {
		return
	}
	switch d.Action {
	case bootimage.Skip:
		eventType := corev1.EventTypeNormal
		if d.Warns() {
			eventType = corev1.EventTypeWarning
			log.Info("Skipping boot image update", "message", d.Message)
		} else {
			log.V(1).Info("Skipping boot image update", "message", d.Message)
		}
		recorder.Event(obj, eventType, d.Reason, "Boot image update skipped: "+d.Message)
	case bootimage.Error:
		metrics.countError(d)
		if d.ClusterLevel() {
			// The same for every object: MachineConfiguration/cluster says it once.
			log.V(1).Info("Cannot update boot image", "message", d.Message)
			return
		}
		log.Error(errors.New(d.Message), "Cannot update boot image")
		recorder.Event(obj, corev1.EventTypeWarning, d.Reason, "Boot image update failed: "+d.Message)
	}
}

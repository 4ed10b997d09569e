package kube

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// FirstSaid is when an Event on d's object first gave d's reason and named d's target; zero when
// none did. The operator records a decision once, when it changes, so this is the cluster's own
// record of when the decision was first taken: the operator and bootimagectl both start the cloud
// grace period there, and it outlives a restart. c must read from the API server (field selectors).
func FirstSaid(ctx context.Context, c client.Reader, d bootimage.Decision) (time.Time, error) {
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(d.Namespace), client.MatchingFields{
		"involvedObject.kind": d.Kind, "involvedObject.name": d.Name, "reason": d.Reason,
	}); err != nil {
		return time.Time{}, err
	}
	var first time.Time
	for _, e := range events.Items {
		if !strings.Contains(e.Message, d.Target) {
			continue
		}
		at := e.FirstTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, nil
}

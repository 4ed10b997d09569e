package controller

import (
	"cmp"
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

// Nodes that join a pool after a refresh: HyperShift writes no record of the payload a node
// booted, so the controller infers it. The ignition server serves the payload it generated for
// the token Secret's config, and writes payload (and payload-refresh-config) into the Secret
// after caching it; a Machine's instance fetches its Ignition after the Machine is created. So a
// Machine created after the controller saw the target's payload in place booted that payload.

// markPayloadInPlace stamps the ConfigMap, about to hold the token Secret's payload for its
// hash, with now: the token Secret held that payload when this pass read it, before now.
func markPayloadInPlace(cm *corev1.ConfigMap, now time.Time) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[PayloadInPlaceAnnotation] = now.UTC().Format(time.RFC3339)
}

// adoptJoined records the target payload hash on each node built with it since it was in place:
// no record yet, no daemon run (no currentConfig, or the rollout target's own), no pod, and a
// Machine of the pool's rollout target created after the payload was in place, beyond the clock
// skew. Any other node without a record gets a daemon pod, which finds nothing to change if it
// booted the target payload after all.
func (r *Reconciler) adoptJoined(ctx context.Context, p *poolPass) error {
	if p.cm == nil || p.cm.Data[hypershift.KeyHash] != p.target {
		return nil
	}
	since, err := time.Parse(time.RFC3339, p.cm.Annotations[PayloadInPlaceAnnotation])
	if err != nil {
		return nil // written before the stamp, or by hand: nothing known
	}
	after := since.Add(cmp.Or(r.ClockSkew, DefaultClockSkew))
	for i := range p.nodes {
		n := &p.nodes[i]
		a := n.Annotations
		m, ok := p.machineOf[n.Name]
		built := a[pool.CurrentConfigAnnotation] == "" || a[pool.CurrentConfigAnnotation] == p.rollout
		untouched := a[pool.DesiredConfigAnnotation] == "" || !strings.HasPrefix(a[pool.DesiredConfigAnnotation], p.rollout+"-")
		if !ok || m.rollout != p.rollout || !m.created.After(after) || a[pool.CurrentRefreshConfigAnnotation] != "" ||
			!built || !untouched || p.podOn[n.Name] != nil {
			continue
		}
		log.FromContext(ctx).Info("Adopting a node built with the target payload", "node", n.Name, "machine", m.name,
			"refreshConfig", p.payloadHash, "payloadInPlaceSince", since)
		if err := r.annotate(ctx, n, map[string]string{pool.CurrentRefreshConfigAnnotation: p.payloadHash}); err != nil {
			return err
		}
	}
	return nil
}

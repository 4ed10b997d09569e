package capireconciler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// TemplateCollector deletes the template copies this operator made that nothing uses any more
// (clusterapi.DeletableTemplates): after each pass of their owner, whatever it decided, when their
// owner is gone, and in a sweep of the whole namespace that catches what an event missed. It
// reads only the Cluster API cache, so a steady state costs no request.
//
// This operator's own writes never point an owner at a copy being deleted: it claims a copy
// before pointing an owner at it (an old copy reused, as when an image comes back), a claimed copy
// is kept for the grace period, and a claim waits for a delete of that copy already under way (it
// is then created afresh). No lock is held across an API call: the collector marks a copy as
// being deleted, under the lock, only after finding it unclaimed. Another writer (an admin, GitOps)
// pointing an owner at an unused copy between the collector's reads and its delete is not guarded
// against: the owner then names a template that is gone, and its Machines cannot be created until
// the next pass of its owner copies the template again. Cluster API's own controllers only clone
// the template their owner names; one cloning, from a stale cache, a copy just deleted fails and
// retries with the owner's current template. The delete is conditional on the UID read, so a
// template recreated under the same name is not deleted.
type TemplateCollector struct {
	Reader client.Reader // the Cluster API cache
	Writer client.Client
	Mapper apimeta.RESTMapper
	Clock  clock.PassiveClock

	// mu guards claimed and deleting only, never an API call.
	mu      sync.Mutex
	claimed map[types.NamespacedName]time.Time
	// deleting are the copies being deleted; each channel closes when its delete is done.
	deleting map[types.NamespacedName]chan struct{}
}

// grace is how old an unused copy must be to go, and how often kept copies are looked at again.
func grace(ctx context.Context) time.Duration {
	return cmp.Or(seams.From(ctx).TemplateGCGrace, clusterapi.TemplateGCGrace)
}

// claim marks the copy of key as about to be pointed at: kept for the grace period. A delete of
// it under way is waited for, so the copy is then created again.
func (g *TemplateCollector) claim(ctx context.Context, key types.NamespacedName) error {
	g.mu.Lock()
	for g.deleting[key] != nil {
		done := g.deleting[key]
		g.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if g.claimed == nil {
		g.claimed = map[types.NamespacedName]time.Time{}
	}
	g.claimed[key] = g.Clock.Now()
	return nil
}

// startDelete marks the copy of key as being deleted, unless it is claimed; done ends it.
func (g *TemplateCollector) startDelete(key types.NamespacedName) (done func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.claimed[key].IsZero() || g.deleting[key] != nil {
		return nil, false
	}
	if g.deleting == nil {
		g.deleting = map[types.NamespacedName]chan struct{}{}
	}
	ch := make(chan struct{})
	g.deleting[key] = ch
	return func() {
		g.mu.Lock()
		delete(g.deleting, key)
		g.mu.Unlock()
		close(ch)
	}, true
}

// forget drops the claims older than cutoff.
func (g *TemplateCollector) forget(cutoff time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, at := range g.claimed {
		if at.Before(cutoff) {
			delete(g.claimed, key)
		}
	}
}

// copies selects the copies to look at: those made for owner ("<Kind>/<name>"), or every copy
// when owner is "", among the templates of kinds.
type copies struct {
	owner string
	kinds []string
}

// ownerCopies are the copies made for the Cluster API object of kind and name, among the
// templates of kinds.
func ownerCopies(kind, name string, kinds ...string) copies {
	return copies{owner: kind + "/" + name, kinds: kinds}
}

// collect deletes the copies of sel in namespace that may go; those kept (in use, too young,
// claimed, their owner paused) are looked at again by the next sweep.
func (g *TemplateCollector) collect(ctx context.Context, namespace string, sel copies) error {
	cutoff := g.Clock.Now().Add(-grace(ctx))
	g.forget(cutoff)
	for _, kind := range sel.kinds {
		mapping, err := g.Mapper.RESTMapping(schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: kind})
		if apimeta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return err
		}
		labels := map[string]string{clusterapi.TemplateCopyLabel: "true"}
		if owner, name, ok := strings.Cut(sel.owner, "/"); ok {
			labels = clusterapi.TemplateCopyLabels(owner, name)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
		if err := g.Reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
			return err
		}
		// The label selects; the owner annotation decides.
		mine := slices.DeleteFunc(list.Items, func(t unstructured.Unstructured) bool {
			return sel.owner != "" && t.GetAnnotations()[clusterapi.TemplateOwnerAnnotation] != sel.owner
		})
		if len(mine) == 0 {
			continue
		}
		// Nothing in use can be deletable, so without an old enough copy there is nothing to read.
		var deletable []string
		if len(clusterapi.DeletableTemplates(mine, clusterapi.TemplateUse{}, cutoff)) > 0 {
			use, err := g.templateUse(ctx, namespace, strings.TrimSuffix(kind, "Template"), mapping.GroupVersionKind.Version)
			if err != nil {
				return err
			}
			deletable = clusterapi.DeletableTemplates(mine, use, cutoff)
		}
		for i := range mine {
			if err := g.deleteUnused(ctx, &mine[i], deletable); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteUnused deletes t when it is among deletable, unclaimed and its owner not paused.
func (g *TemplateCollector) deleteUnused(ctx context.Context, t *unstructured.Unstructured, deletable []string) error {
	if !slices.Contains(deletable, t.GetName()) {
		return nil
	}
	if why, err := g.ownerPaused(ctx, t); err != nil || why != "" {
		return err
	}
	done, ok := g.startDelete(client.ObjectKeyFromObject(t))
	if !ok {
		return nil
	}
	defer done()
	if err := capi.DeleteTemplate(ctx, g.Writer, t); err != nil {
		return fmt.Errorf("deleting unused template copy %s: %w", t.GetName(), err)
	}
	logf.FromContext(ctx).Info("Deleted unused template copy", "template", t.GetName(), "owner", t.GetAnnotations()[clusterapi.TemplateOwnerAnnotation])
	return nil
}

// ownerPaused says why the owner a copy was made for is paused, "" when it is not or is gone:
// a paused object's copies are left as they are (clusterctl move takes them along).
func (g *TemplateCollector) ownerPaused(ctx context.Context, copy *unstructured.Unstructured) (string, error) {
	kind, name, ok := strings.Cut(copy.GetAnnotations()[clusterapi.TemplateOwnerAnnotation], "/")
	if !ok {
		return "", nil
	}
	owner := clusterAPIObject(kind)
	err := g.Reader.Get(ctx, client.ObjectKey{Namespace: copy.GetNamespace(), Name: name}, owner)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	cluster, err := inputs.ClusterOf(ctx, g.Reader, owner)
	if err != nil {
		return "", err
	}
	return clusterapi.PausedBecause(owner, cluster), nil
}

// templateUse reads what may still need a template of namespace, from the cache (the cached
// objects themselves, read only, not copies): every Cluster API MachineSet's and
// MachineDeployment's reference, and the cloned-from annotations of every Machine and
// infrastructure machine (of kind machineKind in the templates' version), of which only the
// metadata is held.
func (g *TemplateCollector) templateUse(ctx context.Context, namespace, machineKind, version string) (clusterapi.TemplateUse, error) {
	var use clusterapi.TemplateUse
	for _, kind := range []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(kind + "List"))
		if err := g.Reader.List(ctx, l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil && !apimeta.IsNoMatchError(err) {
			return use, err
		}
		for i := range l.Items {
			if ref, err := clusterapi.InfrastructureRef(&l.Items[i]); err == nil {
				use.Owners = append(use.Owners, ref)
			}
			use.Owners = append(use.Owners, restoreUse(&l.Items[i])...)
		}
	}
	infra := schema.GroupVersion{Group: clusterapi.InfrastructureGroup, Version: version}
	for _, gvk := range []schema.GroupVersionKind{clusterapi.GroupVersion.WithKind("MachineList"), infra.WithKind(machineKind + "List")} {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk)
		if err := g.Reader.List(ctx, l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil && !apimeta.IsNoMatchError(err) {
			return use, err
		}
		for i := range l.Items {
			use.ClonedFrom = append(use.ClonedFrom, l.Items[i].GetAnnotations())
		}
	}
	return use, nil
}

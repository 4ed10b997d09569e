package controllers

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
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// templateCollector deletes the template copies this operator made that nothing uses any more
// (bootimage.DeletableTemplates): after each pass of their owner, whatever it decided, when their
// owner is gone, and in a sweep of the whole namespace that catches what an event missed. It
// reads only the Cluster API cache, so a steady state costs no request.
//
// A copy is never deleted while this operator's own writes use it. Between the reads and the
// delete, this operator points an owner at a copy that already exists only after claiming it (an
// old copy reused, as when an image comes back), under the lock the collector holds from its
// reads to its deletes, and a claimed copy is kept for the grace period. Another writer pointing
// an owner at an existing copy in that window is not guarded against. Cluster API's own controllers only
// clone the template their owner names; one cloning, from a stale cache, a copy just deleted
// fails and retries with the owner's current template. The delete is conditional on the UID
// read, so a template recreated under the same name is not deleted.
type templateCollector struct {
	reader client.Reader // the Cluster API cache
	writer client.Client
	mapper apimeta.RESTMapper
	clock  clock.PassiveClock

	mu      sync.Mutex
	claimed map[types.NamespacedName]time.Time
}

// grace is how old an unused copy must be to go, and how often kept copies are looked at again.
func grace(ctx context.Context) time.Duration {
	return cmp.Or(seams.From(ctx).TemplateGCGrace, bootimage.TemplateGCGrace)
}

// claim marks the copy of key as about to be pointed at: kept for the grace period.
func (g *templateCollector) claim(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.claimed == nil {
		g.claimed = map[types.NamespacedName]time.Time{}
	}
	g.claimed[key] = g.clock.Now()
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

// collect deletes the copies of sel in namespace that may go, and says when to look again when
// some are kept (in use, too young, or their owner paused); 0 when none is left.
func (g *templateCollector) collect(ctx context.Context, namespace string, sel copies) (time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	wait := grace(ctx)
	cutoff := g.clock.Now().Add(-wait)
	for key, at := range g.claimed {
		if at.Before(cutoff) {
			delete(g.claimed, key)
		}
	}
	kept := false
	for _, kind := range sel.kinds {
		mapping, err := g.mapper.RESTMapping(schema.GroupKind{Group: bootimage.InfrastructureGroup, Kind: kind})
		if apimeta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		labels := map[string]string{bootimage.TemplateCopyLabel: "true"}
		if owner, name, ok := strings.Cut(sel.owner, "/"); ok {
			labels = bootimage.TemplateCopyLabels(owner, name)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
		if err := g.reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
			return 0, err
		}
		// The label selects; the owner annotation decides.
		mine := slices.DeleteFunc(list.Items, func(t unstructured.Unstructured) bool {
			return sel.owner != "" && t.GetAnnotations()[bootimage.TemplateOwnerAnnotation] != sel.owner
		})
		if len(mine) == 0 {
			continue
		}
		// Nothing in use can be deletable, so without an old enough copy there is nothing to read.
		var deletable []string
		if len(bootimage.DeletableTemplates(mine, bootimage.TemplateUse{}, cutoff)) > 0 {
			use, err := g.templateUse(ctx, namespace, strings.TrimSuffix(kind, "Template"), mapping.GroupVersionKind.Version)
			if err != nil {
				return 0, err
			}
			deletable = bootimage.DeletableTemplates(mine, use, cutoff)
		}
		for i := range mine {
			t := &mine[i]
			if !slices.Contains(deletable, t.GetName()) || !g.claimed[client.ObjectKeyFromObject(t)].IsZero() {
				kept = true
				continue
			}
			if why, err := g.ownerPaused(ctx, t); err != nil || why != "" {
				kept = true
				if err != nil {
					return 0, err
				}
				continue
			}
			if err := capi.DeleteTemplate(ctx, g.writer, t); err != nil {
				return 0, fmt.Errorf("deleting unused template copy %s: %w", t.GetName(), err)
			}
			logf.FromContext(ctx).Info("Deleted unused template copy", "template", t.GetName(), "owner", t.GetAnnotations()[bootimage.TemplateOwnerAnnotation])
		}
	}
	if kept {
		return wait, nil
	}
	return 0, nil
}

// ownerPaused says why the owner a copy was made for is paused, "" when it is not or is gone:
// a paused object's copies are left as they are (clusterctl move takes them along).
func (g *templateCollector) ownerPaused(ctx context.Context, copy *unstructured.Unstructured) (string, error) {
	kind, name, ok := strings.Cut(copy.GetAnnotations()[bootimage.TemplateOwnerAnnotation], "/")
	if !ok {
		return "", nil
	}
	owner := clusterAPIObject(kind)
	err := g.reader.Get(ctx, client.ObjectKey{Namespace: copy.GetNamespace(), Name: name}, owner)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	cluster, err := inputs.ClusterOf(ctx, g.reader, owner)
	if err != nil {
		return "", err
	}
	return bootimage.PausedBecause(owner, cluster), nil
}

// templateUse reads what may still need a template of namespace, from the cache (the cached
// objects themselves, read only, not copies): every Cluster API MachineSet's and
// MachineDeployment's reference, and the cloned-from annotations of every Machine and
// infrastructure machine (of kind machineKind in the templates' version), of which only the
// metadata is held.
func (g *templateCollector) templateUse(ctx context.Context, namespace, machineKind, version string) (bootimage.TemplateUse, error) {
	var use bootimage.TemplateUse
	for _, kind := range []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(bootimage.ClusterAPIGroupVersion.WithKind(kind + "List"))
		if err := g.reader.List(ctx, l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil && !apimeta.IsNoMatchError(err) {
			return use, err
		}
		for i := range l.Items {
			if ref, err := bootimage.InfrastructureRef(&l.Items[i]); err == nil {
				use.Owners = append(use.Owners, ref)
			}
		}
	}
	infra := schema.GroupVersion{Group: bootimage.InfrastructureGroup, Version: version}
	for _, gvk := range []schema.GroupVersionKind{bootimage.ClusterAPIGroupVersion.WithKind("MachineList"), infra.WithKind(machineKind + "List")} {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk)
		if err := g.reader.List(ctx, l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil && !apimeta.IsNoMatchError(err) {
			return use, err
		}
		for i := range l.Items {
			use.ClonedFrom = append(use.ClonedFrom, l.Items[i].GetAnnotations())
		}
	}
	return use, nil
}

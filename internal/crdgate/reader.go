package crdgate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// SyncWait is how long a read waits, at most, for an informer that has not synced since it was
// first seen: long enough for one that just started (a kind just served) to list, short enough
// that a reconcile never hangs on one that cannot (a conversion webhook down, a rule revoked).
const SyncWait = 5 * time.Second

// NotSyncedError is a read of a kind whose informer has not synced within SyncWait.
type NotSyncedError struct{ GroupVersionKind schema.GroupVersionKind }

func (e *NotSyncedError) Error() string {
	return fmt.Sprintf("the cache of %s has not synced: its list fails or is slow", e.GroupVersionKind.Kind)
}

// IsNotSynced reports whether err is a NotSyncedError.
func IsNotSynced(err error) bool {
	var e *NotSyncedError
	return errors.As(err, &e)
}

// SyncedReader is a client whose cached reads never wait on an informer that has not synced: a
// kind a gate follows and last saw unserved reads as not served (a NoKindMatchError), and one
// whose informer has not synced within SyncWait of the first read that found it so fails with a
// NotSyncedError.
type SyncedReader struct {
	client.Client
	Cache cache.Informers
	Gates []*Gate
	// All guards every read; otherwise only reads of typed objects of kinds a gate follows are
	// (the manager's client reads unstructured objects from the API server, not the cache).
	All bool

	mu sync.Mutex
	// unsynced is when each informer was first found not synced.
	unsynced map[schema.GroupVersionKind]unsynced
}

type unsynced struct {
	since    time.Time
	informer cache.Informer
}

func (r *SyncedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.ready(ctx, obj, false); err != nil {
		return err
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

func (r *SyncedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.ready(ctx, list, true); err != nil {
		return err
	}
	return r.Client.List(ctx, list, opts...)
}

// ready returns nil when the informer obj is read from has synced, waiting for it up to SyncWait
// after it was first found not synced.
func (r *SyncedReader) ready(ctx context.Context, obj runtime.Object, isList bool) error {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme())
	if err != nil {
		return nil // the client says why
	}
	if isList {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	mapping, err := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	followed := false
	for _, g := range r.Gates {
		f, served := g.Served(mapping.Resource)
		if f && !served {
			return &apimeta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
		}
		followed = followed || f
	}
	var probe client.Object
	switch obj.(type) {
	case *unstructured.Unstructured, *unstructured.UnstructuredList:
		if !r.All {
			return nil
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		probe = u
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		if !r.All {
			return nil
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		probe = m
	default:
		if !r.All && !followed {
			return nil
		}
		o, err := r.Scheme().New(gvk)
		if err != nil {
			return nil
		}
		probe = o.(client.Object)
	}
	informer, err := r.Cache.GetInformer(ctx, probe, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if informer.HasSynced() {
		r.mu.Lock()
		delete(r.unsynced, gvk)
		r.mu.Unlock()
		return nil
	}
	r.mu.Lock()
	if r.unsynced == nil {
		r.unsynced = map[schema.GroupVersionKind]unsynced{}
	}
	// A new informer of the kind (the old one removed) has its own wait.
	first, seen := r.unsynced[gvk]
	if !seen || first.informer != informer {
		first = unsynced{since: time.Now(), informer: informer}
		r.unsynced[gvk] = first
	}
	r.mu.Unlock()
	wait, cancel := context.WithDeadline(ctx, first.since.Add(SyncWait))
	defer cancel()
	if toolscache.WaitForCacheSync(wait.Done(), informer.HasSynced) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &NotSyncedError{GroupVersionKind: gvk}
}

// Package migrations runs small, ordered, idempotent migrations of MachineConfiguration/cluster.
//
// A migration decides from the object as it is now whether it has anything to do, so running it
// twice, or after a restart in the middle, is harmless. Its write is one merge patch that carries
// the resourceVersion it decided on: a concurrent edit makes it fail with a conflict, and the
// runner reads the object again and decides again, so a user's edit is never overwritten. The same
// patch records the migration in an annotation, and an Event says what changed.
package migrations

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// AnnotationPrefix prefixes the annotation each migration leaves on the object it migrated.
const AnnotationPrefix = "bootimage.openshift.io/migration."

// ReasonMigrated is the Event reason of an applied migration.
const ReasonMigrated = "MachineConfigurationMigrated"

// Cluster is what migrations know about the cluster besides the object.
type Cluster struct {
	Platform configv1.PlatformType
	Gates    bootimage.Gates
}

// Migration is one change of MachineConfiguration/cluster.
type Migration struct {
	// Name is stable: it names the annotation that records the migration.
	Name string
	// Plan returns the new value of spec fields (a JSON merge patch of spec) and a message for
	// the admin, or nil when mc needs nothing.
	Plan func(mc *operatorv1.MachineConfiguration, cluster Cluster) (specPatch map[string]any, message string)
}

// All are the migrations, in the order they run.
var All = []Migration{EmptyMachineManagers}

// maxConflicts bounds how often one migration re-reads after losing a race before giving up
// until the next reconcile.
const maxConflicts = 5

// Runner applies migrations through a client.
type Runner struct {
	Client client.Client
	// Reader reads the object again after a conflict; use an uncached reader.
	Reader     client.Reader
	Recorder   record.EventRecorder
	Migrations []Migration
	// BeforeWrite, when set, runs just before a migration's patch is sent; an error stops the run.
	// Tests use it to race a user's edit or to stop the operator in the middle.
	BeforeWrite func(ctx context.Context, migration string) error
	// Clock stamps the migration annotation; nil is the real clock.
	Clock clock.PassiveClock
}

func (r Runner) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Run applies every migration mc needs, in order, updating mc in place. It reports whether it
// wrote anything.
func (r Runner) Run(ctx context.Context, mc *operatorv1.MachineConfiguration, cluster Cluster) (bool, error) {
	wrote := false
	for _, m := range r.Migrations {
		done, err := r.apply(ctx, m, mc, cluster)
		if err != nil {
			return wrote, fmt.Errorf("migration %s of MachineConfiguration/%s: %w", m.Name, mc.Name, err)
		}
		wrote = wrote || done
	}
	return wrote, nil
}

func (r Runner) apply(ctx context.Context, m Migration, mc *operatorv1.MachineConfiguration, cluster Cluster) (bool, error) {
	log := logf.FromContext(ctx).WithValues("migration", m.Name, "machineConfiguration", mc.Name)
	for range maxConflicts {
		specPatch, message := m.Plan(mc, cluster)
		if specPatch == nil {
			return false, nil
		}
		if r.BeforeWrite != nil {
			if err := r.BeforeWrite(ctx, m.Name); err != nil {
				return false, err
			}
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{
				"resourceVersion": mc.ResourceVersion,
				"annotations":     map[string]string{AnnotationPrefix + m.Name: r.now().UTC().Format(time.RFC3339)},
			},
			"spec": specPatch,
		})
		if err != nil {
			return false, err
		}
		log.Info("Migrating MachineConfiguration", "resourceVersion", mc.ResourceVersion, "reason", message)
		err = r.Client.Patch(ctx, mc, client.RawPatch(types.MergePatchType, body))
		if apierrors.IsConflict(err) {
			log.Info("MachineConfiguration changed meanwhile, deciding again")
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, err
		}
		r.Recorder.Event(mc, corev1.EventTypeNormal, ReasonMigrated, message)
		return true, nil
	}
	return false, fmt.Errorf("gave up after %d conflicting writes; will retry", maxConflicts)
}

// EmptyMachineManagers turns the legacy opt-out `machineManagers: []` into explicit None entries
// for every resource the cluster supports, the Cluster API ones included while their gate is on.
// An empty list does not survive every Kubernetes round trip, and losing it would silently opt the
// cluster in.
var EmptyMachineManagers = Migration{
	Name: "empty-machine-managers",
	Plan: func(mc *operatorv1.MachineConfiguration, cluster Cluster) (map[string]any, string) {
		if !bootimage.IsLegacyOptOut(mc.Spec.ManagedBootImages) {
			return nil, ""
		}
		resources := bootimage.SupportedResources(cluster.Platform, cluster.Gates)
		// The MachineSets entry is written even where unsupported: it keeps the opt-out explicit
		// if the platform or gates change later.
		if len(resources) == 0 || resources[0] != operatorv1.MachineSets {
			resources = append([]operatorv1.MachineManagerMachineSetsResourceType{operatorv1.MachineSets}, resources...)
		}
		var entries []map[string]any
		var names []string
		add := func(res operatorv1.MachineManagerMachineSetsResourceType, group operatorv1.MachineManagerMachineSetsAPIGroupType, name string) {
			entries = append(entries, map[string]any{"resource": res, "apiGroup": group, "selection": map[string]any{"mode": operatorv1.None}})
			names = append(names, name)
		}
		for _, res := range resources {
			add(res, operatorv1.MachineAPI, string(res))
		}
		// Like the MachineSets entry, written on every platform: the gate is what makes them valid.
		if cluster.Gates.Enabled(featuregates.ManagedBootImagesAWSCAPI) {
			for _, res := range []operatorv1.MachineManagerMachineSetsResourceType{operatorv1.MachineSets, bootimage.MachineDeployments} {
				add(res, bootimage.ClusterAPIGroup, string(res)+"."+string(bootimage.ClusterAPIGroup))
			}
		}
		msg := fmt.Sprintf("Replaced the legacy opt-out spec.managedBootImages.machineManagers: [] with explicit selection mode None for %v", names)
		return map[string]any{"managedBootImages": map[string]any{"machineManagers": entries}}, msg
	},
}

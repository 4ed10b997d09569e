package controllers

import (
	"context"

	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// NewReconcilersForTest returns the MachineSet and MachineConfiguration reconcilers on c without
// a manager, for specs that call Reconcile directly.
func NewReconcilersForTest(c client.Client, gates kube.GateSource, images bootimage.Clouds, recorder record.EventRecorder, tracker *Tracker) (*MachineSetReconciler, *MachineConfigurationReconciler) {
	bootImages := steps.BootImages{
		Client:   c,
		Inputs:   steps.ClusterInputs{Client: c, Gates: gates, Clouds: images, Streams: &inputs.StreamCache{}, Namespace: kube.MCONamespace},
		Recorder: recorder, Tracker: tracker,
		Clock: clock.RealClock{},
	}
	mc := &MachineConfigurationReconciler{
		Client: c, Gates: gates, Recorder: recorder, Tracker: tracker, Streams: &inputs.StreamCache{},
		Namespace:  kube.MCONamespace,
		Migrations: migrations.Runner{Client: c, Reader: c, Recorder: recorder, Migrations: migrations.All},
		Status:     &status.Writer{Client: c, Reader: c, Recorder: recorder, Clock: clock.RealClock{}},
	}
	return &MachineSetReconciler{bootImages}, mc
}

// UpgradeUserDataForTest writes the upgraded stub of read, as a boot image update does.
func UpgradeUserDataForTest(ctx context.Context, c client.Client, recorder record.EventRecorder, read *bootimage.UserData) error {
	return steps.UpgradeUserDataForTest(ctx, c, recorder, read)
}

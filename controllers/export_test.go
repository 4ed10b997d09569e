package controllers

import (
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/kube"
)

// NewBootImageReconcilersForTest returns the MachineSet and CPMS reconcilers on c without a
// manager, for specs that call Reconcile directly.
func NewBootImageReconcilersForTest(c client.Client, gates kube.GateSource, images bootimage.Catalog, recorder record.EventRecorder, tracker *Tracker) (*MachineSetReconciler, *ControlPlaneMachineSetReconciler) {
	steps := bootImages{
		Client:   c,
		Inputs:   clusterInputs{Client: c, Gates: gates, Images: images, Streams: &bootimage.StreamCache{}, Namespace: MCONamespace},
		Recorder: recorder, Tracker: tracker, Timings: CloudTimings{}.withDefaults(), Unavailable: newLastingSkips(),
		Clock: clock.RealClock{},
	}
	return &MachineSetReconciler{steps}, &ControlPlaneMachineSetReconciler{steps}
}

package steps

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/internal/vsphereimport"
)

// VSphereImport holds back a vSphere update until its template is imported. It returns the
// decision to apply, or wait with the result to return: the import was asked for (its end
// reconciles the object again) or failed (reported, retried after the import's backoff). The
// update of the object that asked first records the import once it is made.
func (s BootImages) VSphereImport(ctx context.Context, live client.Object, d bootimage.Decision, inputs string) (bootimage.Decision, *ctrl.Result) {
	w := vsphereimport.Waiter{Kind: d.Kind, Name: client.ObjectKeyFromObject(live)}
	if asked, ok := s.Templates.Imported(w); ok {
		if d = vsphere.Imported(asked, d); d.Action != bootimage.Update {
			s.Templates.Recorded(w)
		}
	}
	imp := vsphere.ImportOf(d)
	if d.Action != bootimage.Update || imp == nil {
		return d, nil
	}
	if s.Templates == nil {
		failed := d
		failed.Action, failed.Reason, failed.Message = bootimage.Error, ReasonTemplateImportFailed, "a vSphere import is due but no template importer is configured"
		report(ctx, s.Recorder, s.Tracker, s.Metrics, live, failed, inputs)
		return d, &ctrl.Result{}
	}
	state := s.Templates.Request(w, d)
	if state.Err != nil {
		failed := d
		failed.Action, failed.Reason, failed.Message = bootimage.Error, ReasonTemplateImportFailed, fmt.Sprintf("importing template %s in vCenter %s folder %s: %s", imp.Name, imp.Server, imp.Folder, cloud.CleanMessage(state.Err.Error()))
		report(ctx, s.Recorder, s.Tracker, s.Metrics, live, failed, inputs)
		return d, &ctrl.Result{RequeueAfter: state.RetryIn}
	}
	logf.FromContext(ctx).V(1).Info("Waiting for a template import", "template", imp.Name, "release", imp.Release)
	return d, &ctrl.Result{RequeueAfter: state.Poll}
}

package controllers

import (
	"context"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/kube"
)

// Where vSphere settings live, as the installer writes them.
const (
	VSphereCredentialsNamespace = kube.VSphereCredentialsNamespace
	VSphereCredentialsSecret    = kube.VSphereCredentialsSecret
	InstallConfigConfigMap      = kube.InstallConfigConfigMap
)

// DefaultOVACacheDir is where downloaded OVAs are kept: a writable volume of the Deployment.
const DefaultOVACacheDir = "/var/cache/bootimage-operator"

// DefaultOVACacheBytes bounds the OVA cache: an RHCOS OVA is about 1.2 GB.
const DefaultOVACacheBytes = 4 << 30

// ReasonTemplateImportFailed is the reason of an Error decision whose vCenter import failed.
const ReasonTemplateImportFailed = "TemplateImportFailed"

// setupVSphere adds the vCenter sessions and the template imports to mgr and returns the imports,
// which vSphere updates wait for and which trigger their MachineSets when done.
func setupVSphere(mgr ctrl.Manager, rootCAs *x509.CertPool, cacheDir string) (*cloud.VCenters, *TemplateImports, error) {
	reader := mgr.GetAPIReader()
	vcenters := &cloud.VCenters{RootCAs: rootCAs, Credentials: kube.VSphereCredentials(reader)}
	if cacheDir == "" {
		cacheDir = DefaultOVACacheDir
	}
	ovas := &cloud.OVACache{Dir: cacheDir, MaxBytes: DefaultOVACacheBytes}
	imports := &TemplateImports{Swapper: bootimage.VSphereSwapper{
		Store:       vcenters,
		OVA:         ovas.Get,
		NewDiskType: func(ctx context.Context) (string, error) { return installConfigDiskType(ctx, reader) },
		AfterStep: func(ctx context.Context, step bootimage.VSphereSwapStep) error {
			return seams.AfterTemplateStep(ctx, string(step))
		},
	}}
	for _, r := range []interface{ Start(context.Context) error }{vcenters, imports} {
		if err := mgr.Add(r); err != nil {
			return nil, nil, err
		}
	}
	return vcenters, imports, nil
}

// vsphereImport holds back a vSphere update until its template is imported. It returns the
// decision to apply, or wait with the result to return: the import was asked for (its end
// reconciles the object again) or failed (reported, retried after the import's backoff). The
// update of the object that asked first records the import once it is made.
func (s bootImages) vsphereImport(ctx context.Context, live client.Object, d bootimage.Decision, inputs string) (bootimage.Decision, *ctrl.Result) {
	w := waiter{kind: d.Kind, name: client.ObjectKeyFromObject(live)}
	if asked, ok := s.Templates.imported(w); ok {
		if d = bootimage.VSphereImported(asked, d); d.Action != bootimage.Update {
			s.Templates.recorded(w)
		}
	}
	if d.Action != bootimage.Update || d.VSphere == nil {
		return d, nil
	}
	if s.Templates == nil {
		failed := d
		failed.Action, failed.Reason, failed.Message = bootimage.Error, ReasonTemplateImportFailed, "a vSphere import is due but no template importer is configured"
		report(ctx, s.Recorder, s.Tracker, s.Metrics, live, failed, inputs)
		return d, &ctrl.Result{}
	}
	state := s.Templates.request(w, d)
	if state.err != nil {
		failed := d
		failed.Action, failed.Reason, failed.Message = bootimage.Error, ReasonTemplateImportFailed, fmt.Sprintf("importing template %s in vCenter %s folder %s: %s", d.VSphere.Name, d.VSphere.Server, d.VSphere.Folder, cloud.CleanMessage(state.err.Error()))
		report(ctx, s.Recorder, s.Tracker, s.Metrics, live, failed, inputs)
		return d, &ctrl.Result{RequeueAfter: state.retryIn}
	}
	logf.FromContext(ctx).V(1).Info("Waiting for a template import", "template", d.VSphere.Name, "release", d.VSphere.Release)
	return d, &ctrl.Result{RequeueAfter: state.poll}
}

// installConfigDiskType is platform.vsphere.diskType of the install config: a new failure domain
// has no template to take it from. Without an install config, the datastore's policy decides.
func installConfigDiskType(ctx context.Context, reader client.Reader) (string, error) {
	cm := &corev1.ConfigMap{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: VSphereCredentialsNamespace, Name: InstallConfigConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", VSphereCredentialsNamespace, InstallConfigConfigMap, err)
	}
	var ic struct {
		Platform struct {
			VSphere struct {
				DiskType string `json:"diskType"`
			} `json:"vsphere"`
		} `json:"platform"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["install-config"]), &ic); err != nil {
		return "", fmt.Errorf("ConfigMap %s/%s key install-config: %w", VSphereCredentialsNamespace, InstallConfigConfigMap, err)
	}
	return ic.Platform.VSphere.DiskType, nil
}

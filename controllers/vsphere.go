package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// Where vSphere settings live, as the installer writes them.
const (
	VSphereCredentialsNamespace = "kube-system"
	VSphereCredentialsSecret    = "vsphere-creds"
	InstallConfigConfigMap      = "cluster-config-v1"
)

// DefaultOVACacheDir is where downloaded OVAs are kept: a writable volume of the Deployment.
const DefaultOVACacheDir = "/var/cache/bootimage-operator"

// DefaultOVACacheBytes bounds the OVA cache: an RHCOS OVA is about 1.2 GB.
const DefaultOVACacheBytes = 4 << 30

// importTimeout bounds one template import, download and upload included, so a stalled vCenter
// or mirror cannot hold a worker for ever.
const importTimeout = time.Hour

// ReasonTemplateImportFailed is the reason of an Error decision whose vCenter import failed.
const ReasonTemplateImportFailed = "TemplateImportFailed"

// templateStore is what a template swap needs from vCenter, every VM named within a folder.
type templateStore interface {
	bootimage.VSphereTemplates
	ImportTemplate(ctx context.Context, imp bootimage.VSphereImport, name, ovaPath, diskType string) error
	RenameTemplate(ctx context.Context, at bootimage.VSphereLocation, from, to string) error
	DestroyTemplate(ctx context.Context, at bootimage.VSphereLocation, name string) error
}

// Swap steps, in order; a test seam stops a swap after any of them.
const (
	stepImported    = "imported"
	stepRenamedAway = "renamed-away"
	stepRenamedIn   = "renamed-in"
	stepDeletedOld  = "deleted-old"
)

// TemplateImporter makes a vSphere failure domain's template the stream's RHCOS release without
// a moment where a half-imported template carries the name MachineSets clone: the OVA is imported
// under a temporary name and verified, the old template is renamed away, the new one renamed in,
// and the old one deleted. Each step leaves a state the next run recognises and finishes from;
// the temporary names are the MCO's, so leftovers of either are recovered.
type TemplateImporter struct {
	Store templateStore
	OVAs  *cloud.OVACache
	// Reader reads the install config for the disk provisioning of a new template.
	Reader client.Reader

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Ensure makes template imp.Name current, recovering first from an interrupted earlier run.
// imported is false when the template was current already (another MachineSet of the same
// failure domain imported it): the caller's decision is stale and must be taken again.
func (t *TemplateImporter) Ensure(ctx context.Context, imp bootimage.VSphereImport) (imported bool, err error) {
	unlock := t.lock(imp.Key())
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	log := logf.FromContext(ctx).WithValues("server", imp.Server, "folder", imp.Folder, "template", imp.Name)
	at := imp.VSphereLocation
	importing, replaced := bootimage.VSphereSwapNames(imp.Name)
	current, err := t.Store.VSphereTemplate(ctx, at, imp.Name)
	if err != nil {
		return false, err
	}
	old, err := t.Store.VSphereTemplate(ctx, at, replaced)
	if err != nil {
		return false, err
	}
	switch {
	case current == nil && old != nil:
		log.Info("Restoring a template an interrupted swap renamed away", "from", replaced)
		if err := t.Store.RenameTemplate(ctx, at, replaced, imp.Name); err != nil {
			return false, err
		}
		if current, err = t.Store.VSphereTemplate(ctx, at, imp.Name); err != nil {
			return false, err
		}
	case old != nil:
		log.Info("Deleting the template an interrupted swap replaced", "oldTemplate", replaced)
		if err := t.Store.DestroyTemplate(ctx, at, replaced); err != nil {
			return false, err
		}
	}
	if current != nil && current.Version == imp.Release {
		return false, t.Store.DestroyTemplate(ctx, at, importing)
	}

	next, err := t.Store.VSphereTemplate(ctx, at, importing)
	if err != nil {
		return false, err
	}
	if !verified(next, imp.Release) {
		if err := t.importOVA(ctx, imp, current, importing); err != nil {
			return false, err
		}
		if next, err = t.Store.VSphereTemplate(ctx, at, importing); err != nil {
			return false, err
		}
		if !verified(next, imp.Release) {
			return false, fmt.Errorf("imported %s from OVA %s (sha256 %s) is not a template of RHCOS %s; left for the next attempt to replace", importing, imp.OVALocation, imp.OVASHA256, imp.Release)
		}
		if err := t.after(ctx, stepImported); err != nil {
			return false, err
		}
	} else {
		log.Info("Reusing a verified template an interrupted swap imported", "importedTemplate", importing)
	}

	if current != nil {
		if err := t.Store.RenameTemplate(ctx, at, imp.Name, replaced); err != nil {
			return false, err
		}
		if err := t.after(ctx, stepRenamedAway); err != nil {
			return false, err
		}
	}
	if err := t.Store.RenameTemplate(ctx, at, importing, imp.Name); err != nil {
		return false, err
	}
	if err := t.after(ctx, stepRenamedIn); err != nil {
		return false, err
	}
	if current != nil {
		if err := t.Store.DestroyTemplate(ctx, at, replaced); err != nil {
			return false, err
		}
	}
	if err := t.after(ctx, stepDeletedOld); err != nil {
		return false, err
	}
	log.Info("Imported template", "release", imp.Release, "ova", imp.OVALocation)
	return true, nil
}

func (t *TemplateImporter) importOVA(ctx context.Context, imp bootimage.VSphereImport, current *bootimage.VSphereTemplate, name string) error {
	if err := t.Store.DestroyTemplate(ctx, imp.VSphereLocation, name); err != nil {
		return err
	}
	// The new template is provisioned as the one it replaces; a new failure domain's as the
	// install config says.
	var diskType string
	if current != nil {
		diskType = current.DiskType
	} else {
		dt, err := t.installConfigDiskType(ctx)
		if err != nil {
			return err
		}
		diskType = dt
	}
	ova, err := t.OVAs.Get(ctx, imp.OVALocation, imp.OVASHA256)
	if err != nil {
		return err
	}
	logf.FromContext(ctx).Info("Importing OVA", "ova", imp.OVALocation, "as", name, "folder", imp.Folder, "diskType", diskType)
	return t.Store.ImportTemplate(ctx, imp, name, ova, diskType)
}

// installConfigDiskType is platform.vsphere.diskType of the install config: a new failure domain
// has no template to take it from. Without an install config, the datastore's policy decides.
func (t *TemplateImporter) installConfigDiskType(ctx context.Context) (string, error) {
	cm := &corev1.ConfigMap{}
	err := t.Reader.Get(ctx, client.ObjectKey{Namespace: VSphereCredentialsNamespace, Name: InstallConfigConfigMap}, cm)
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

func verified(t *bootimage.VSphereTemplate, release string) bool {
	return t != nil && t.IsTemplate && t.Version == release
}

// after runs the test seam of the swap step, if the context carries one.
func (t *TemplateImporter) after(ctx context.Context, step string) error {
	return seams.AfterTemplateStep(ctx, step)
}

func (t *TemplateImporter) lock(key string) func() {
	t.mu.Lock()
	if t.locks == nil {
		t.locks = map[string]*sync.Mutex{}
	}
	l, ok := t.locks[key]
	if !ok {
		l = &sync.Mutex{}
		t.locks[key] = l
	}
	t.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// importTemplate runs a vSphere update's import before its MachineSet is patched. again is true
// when the template turned out current already: the decision is taken again on fresh reads.
// A failed import is reported as an Error decision naming the cause, and retried.
func (s bootImageSteps) importTemplate(ctx context.Context, t target, d bootimage.Decision, inputs string) (again bool, err error) {
	if s.Templates == nil {
		return false, fmt.Errorf("%s %s/%s: a vSphere import is due but no template importer is configured", d.Kind, d.Namespace, d.Name)
	}
	imported, err := s.Templates.Ensure(ctx, *d.VSphere)
	if err != nil {
		failed := d
		failed.Action, failed.Reason, failed.Message = bootimage.Error, ReasonTemplateImportFailed, fmt.Sprintf("importing template %s in vCenter %s folder %s: %v", d.VSphere.Name, d.VSphere.Server, d.VSphere.Folder, err)
		report(ctx, s.Recorder, s.Tracker, s.Metrics, t.live, failed, inputs)
		return false, err
	}
	return !imported, nil
}

// vsphereRequeue is how soon a decision made stale by another MachineSet's import is taken again.
const vsphereRequeue = time.Second

// vsphereResult is the result of a reconcile stopped by importTemplate.
func vsphereResult(err error) (ctrl.Result, error) {
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: vsphereRequeue}, nil
}

// newVSphere returns the vCenter adapter and the importer of the operator.
func newVSphere(reader client.Reader, rootCAs *x509.CertPool, cacheDir string) (*cloud.VCenters, *TemplateImporter) {
	vcenters := &cloud.VCenters{RootCAs: rootCAs, Credentials: VSphereCredentials(reader)}
	if cacheDir == "" {
		cacheDir = DefaultOVACacheDir
	}
	importer := &TemplateImporter{Store: vcenters, Reader: reader, OVAs: &cloud.OVACache{Dir: cacheDir, MaxBytes: DefaultOVACacheBytes}}
	return vcenters, importer
}

// VSphereCredentials reads a vCenter's login from Secret kube-system/vsphere-creds, directly: the
// RBAC grants that one Secret, not a watch. Without the Secret or the server's keys it answers
// bootimage.ErrNoCatalog.
func VSphereCredentials(reader client.Reader) func(ctx context.Context, server string) (cloud.VSphereCredentials, error) {
	return func(ctx context.Context, server string) (cloud.VSphereCredentials, error) {
		secret := &corev1.Secret{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: VSphereCredentialsNamespace, Name: VSphereCredentialsSecret}, secret)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return cloud.VSphereCredentials{}, fmt.Errorf("%w: Secret %s/%s: %v", bootimage.ErrNoCatalog, VSphereCredentialsNamespace, VSphereCredentialsSecret, err)
		}
		if err != nil {
			return cloud.VSphereCredentials{}, fmt.Errorf("reading Secret %s/%s: %w", VSphereCredentialsNamespace, VSphereCredentialsSecret, err)
		}
		user, pass := secret.Data[server+".username"], secret.Data[server+".password"]
		if len(user) == 0 || len(pass) == 0 {
			return cloud.VSphereCredentials{}, fmt.Errorf("%w: Secret %s/%s has no %s.username and %s.password", bootimage.ErrNoCatalog, VSphereCredentialsNamespace, VSphereCredentialsSecret, server, server)
		}
		return cloud.VSphereCredentials{Version: secret.ResourceVersion, Username: string(user), Password: string(pass)}, nil
	}
}

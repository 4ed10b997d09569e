// Package vspherecloud implements vsphere.Templates with vCenter (govmomi) and keeps the
// downloaded OVAs (OVACache). It is the only package of bootimage/ that links govmomi.
package vspherecloud

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/nfc"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/ovf"
	"github.com/vmware/govmomi/ovf/importer"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/singleflight"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
)

// Credentials is a vCenter login, as Secret kube-system/vsphere-creds holds it.
type Credentials struct {
	// Version identifies the credentials (the Secret's resourceVersion): a session is replaced
	// when it changes.
	Version            string
	Username, Password string
}

// sessionCheckInterval is how often a cached session is asked whether vCenter still knows it
// (vCenter expires idle sessions after 30 minutes by default).
const sessionCheckInterval = time.Minute

// Deadlines of vCenter calls, so that a vCenter that stops answering holds no caller for ever.
const (
	// defaultVCenterCallTimeout bounds a call that reads or asks for a task (a lookup, a login).
	defaultVCenterCallTimeout = 30 * time.Second
	// defaultVCenterTaskTimeout bounds a task that vCenter runs (a rename, a deletion).
	defaultVCenterTaskTimeout = 5 * time.Minute
)

// VCenters reads and writes VM templates through govmomi, with one session per vCenter, reused
// until the credentials change or vCenter forgets it, and logged out by Close. No lock is held
// across a call to vCenter: a login or session check is made once for all callers, each of which
// waits for it only as long as its own context allows.
type VCenters struct {
	// Credentials returns the login for server; bootimage.ErrNoCatalog when there is none.
	Credentials func(ctx context.Context, server string) (Credentials, error)
	// RootCAs are the CAs trusted for vCenter and its hosts; nil trusts the system pool, which in
	// the operator's pod is the cluster's trusted CA bundle. Certificates are always verified.
	RootCAs *x509.CertPool
	// CallTimeout and TaskTimeout bound each call; zero takes the defaults.
	CallTimeout, TaskTimeout time.Duration

	// wrapSOAP, when set, wraps the SOAP transport of each new session, inside the fence: tests
	// hold requests there as a slow network would.
	wrapSOAP func(soap.RoundTripper) soap.RoundTripper

	logins   singleflight.Group
	mu       sync.Mutex
	sessions map[string]*vcenterSession
	closed   bool
}

type vcenterSession struct {
	version string
	vim     *vim25.Client
	manager *session.Manager
	rest    *rest.Client
	// checked is when vCenter last said it knows the session, in Unix nanoseconds.
	checked atomic.Int64
}

func (v *VCenters) call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return step(ctx, cmp.Or(v.CallTimeout, defaultVCenterCallTimeout))
}

func (v *VCenters) task(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return step(ctx, cmp.Or(v.TaskTimeout, defaultVCenterTaskTimeout))
}

// step bounds one vCenter step by timeout and, in a leader-elected process, by the closing time
// of the fence ctx carries: a request not sent by then is never sent, one in flight is cancelled.
func step(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc, error) {
	fenced, cancelFence, err := cloud.Fence(ctx).Context(ctx)
	if err != nil {
		return ctx, func() {}, fmt.Errorf("vCenter: %w", err)
	}
	bounded, cancel := context.WithTimeout(fenced, timeout)
	return bounded, func() { cancel(); cancelFence() }, nil
}

// fencedSOAP checks the fence of each SOAP request's context as the request is sent.
type fencedSOAP struct{ next soap.RoundTripper }

func (f fencedSOAP) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	if err := cloud.Fence(ctx).Send(ctx); err != nil {
		return fmt.Errorf("vCenter: %w", err)
	}
	return f.next.RoundTrip(ctx, req, res)
}

// fencedReader fails a read once the fence of ctx is closed: an upload outlasting its lease
// stops sending.
type fencedReader struct {
	io.Reader
	ctx context.Context
}

func (r fencedReader) Read(p []byte) (int, error) {
	if err := cloud.Fence(r.ctx).Send(r.ctx); err != nil {
		return 0, err
	}
	return r.Reader.Read(p)
}

// VSphereTemplate implements vsphere.Templates.
func (v *VCenters) Template(ctx context.Context, at vsphere.Location, name string) (*vsphere.Template, error) {
	ctx, cancel, err := v.call(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	vm, err := v.findVM(ctx, at, name)
	if err != nil || vm == nil {
		return nil, err
	}
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.template", "config.vAppConfig", "config.hardware.device", "summary.config.product"}, &props); err != nil {
		return nil, fmt.Errorf("reading VM %s: %w", vm.InventoryPath, err)
	}
	t := &vsphere.Template{Path: vm.InventoryPath, Version: productVersion(props), DiskType: diskType(props)}
	if props.Config != nil {
		t.IsTemplate = props.Config.Template
	}
	return t, nil
}

// RenameTemplate renames VM from to to, both directly in at.Folder.
func (v *VCenters) RenameTemplate(ctx context.Context, at vsphere.Location, from, to string) error {
	ctx, cancel, err := v.task(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	vm, err := v.vm(ctx, at, from)
	if err != nil {
		return err
	}
	task, err := vm.Rename(ctx, to)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("renaming VM %s to %s: %w", vm.InventoryPath, to, err)
	}
	return nil
}

// DestroyTemplate deletes VM name in at.Folder, if it is there.
func (v *VCenters) DestroyTemplate(ctx context.Context, at vsphere.Location, name string) error {
	ctx, cancel, err := v.task(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	vm, err := v.findVM(ctx, at, name)
	if err != nil || vm == nil {
		return err
	}
	task, err := vm.Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("deleting VM %s: %w", vm.InventoryPath, err)
	}
	return nil
}

// ImportTemplate imports the OVA at ovaPath as template name in imp's failure domain, as the
// installer does: one network mapped, disks provisioned as diskType ("" leaves it to the
// datastore's policy), EFI secure boot turned off when the OVA enables it, tagged with the
// cluster's tag and imp.TagIDs, and marked as a template last, so that only a complete import is
// a template. A failed upload aborts the lease, so vCenter removes the partial VM.
func (v *VCenters) ImportTemplate(ctx context.Context, imp vsphere.Import, name, ovaPath, diskType string) error {
	archive := &importer.TapeArchive{Path: ovaPath}
	descriptor, err := importer.ReadOvf("*.ovf", archive)
	if err != nil {
		return fmt.Errorf("OVA %s: reading the OVF descriptor: %w", ovaPath, err)
	}
	envelope, err := importer.ReadEnvelope(descriptor)
	if err != nil {
		return fmt.Errorf("OVA %s: parsing the OVF descriptor: %w", ovaPath, err)
	}
	if envelope.Network == nil || len(envelope.Network.Networks) != 1 {
		return fmt.Errorf("OVA %s: expected exactly one network in the OVF descriptor", ovaPath)
	}
	// The lookups up to the lease and the steps after the upload are bounded like a task; the
	// upload itself, which takes as long as the OVA's size needs, by ctx and by the fence staying
	// open, renewals included.
	setup, cancel, err := v.task(ctx)
	if err != nil {
		return err
	}
	s, lease, info, err := v.startImport(setup, imp, name, string(descriptor), envelope, diskType)
	cancel()
	if err != nil {
		return err
	}
	uploading, cancel := cloud.Fence(ctx).Bind(ctx)
	err = upload(uploading, lease, info, archive)
	cancel()
	if err != nil {
		// A fenced abort: vCenter also ends a lease that is no longer updated.
		if abort, cancel, ferr := v.call(context.WithoutCancel(ctx)); ferr == nil {
			_ = lease.Abort(abort, &types.LocalizedMethodFault{LocalizedMessage: err.Error()})
			cancel()
		}
		return err
	}
	ctx, cancel, err = v.task(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	vm := object.NewVirtualMachine(s.vim, info.Entity)
	if secureBootEnabled(envelope) {
		// The installer turns EFI secure boot off: the RHCOS OVA enables it, and not every
		// deployment (SCOS) boots with it.
		opts, err := vm.BootOptions(ctx)
		if err != nil {
			return fmt.Errorf("reading boot options of %s: %w", name, err)
		}
		opts.EfiSecureBootEnabled = types.NewBool(false)
		if err := vm.SetBootOptions(ctx, opts); err != nil {
			return fmt.Errorf("turning secure boot off on %s: %w", name, err)
		}
	}
	manager := tags.NewManager(s.rest)
	for _, tag := range append([]string{imp.InfrastructureName}, imp.TagIDs...) {
		// The REST API does not go through fencedSOAP.
		if err := cloud.Fence(ctx).Send(ctx); err != nil {
			return fmt.Errorf("vCenter: %w", err)
		}
		if err := manager.AttachTag(ctx, tag, vm.Reference()); err != nil {
			return fmt.Errorf("attaching tag %s to %s: %w", tag, name, err)
		}
	}
	// Last: being a template is what marks an import complete.
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return fmt.Errorf("marking %s as a template: %w", name, err)
	}
	return nil
}

// startImport finds where imp goes and opens the import lease of a VM named name.
func (v *VCenters) startImport(ctx context.Context, imp vsphere.Import, name, descriptor string, envelope *ovf.Envelope, diskType string) (*vcenterSession, *nfc.Lease, *nfc.LeaseInfo, error) {
	s, finder, err := v.finder(ctx, imp.Location)
	if err != nil {
		return nil, nil, nil, err
	}
	folder, err := finder.Folder(ctx, imp.Folder)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("finding folder %s: %w", imp.Folder, err)
	}
	cluster, err := finder.ClusterComputeResource(ctx, imp.ComputeCluster)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("finding compute cluster %s: %w", imp.ComputeCluster, err)
	}
	pool, err := finder.ResourcePool(ctx, imp.ResourcePool)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("finding resource pool %s: %w", imp.ResourcePool, err)
	}
	datastore, err := finder.Datastore(ctx, imp.Datastore)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("finding datastore %s: %w", imp.Datastore, err)
	}
	network, err := finder.Network(ctx, path.Join(cluster.InventoryPath, imp.Network))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("finding network %s of compute cluster %s: %w", imp.Network, imp.ComputeCluster, err)
	}
	params := types.OvfCreateImportSpecParams{
		EntityName:     name,
		NetworkMapping: []types.OvfNetworkMapping{{Name: envelope.Network.Networks[0].Name, Network: network.Reference()}},
	}
	switch diskType {
	case "":
	case "thin", "thick", "eagerZeroedThick":
		params.DiskProvisioning = diskType
	default:
		return nil, nil, nil, fmt.Errorf("disk provisioning type %q is not supported", diskType)
	}
	spec, err := ovf.NewManager(s.vim).CreateImportSpec(ctx, descriptor, pool.Reference(), datastore.Reference(), params)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating the import spec: %w", err)
	}
	if len(spec.Error) > 0 {
		return nil, nil, nil, fmt.Errorf("creating the import spec: %s", spec.Error[0].LocalizedMessage)
	}
	host, err := importHost(ctx, cluster, network, datastore)
	if err != nil {
		return nil, nil, nil, err
	}
	lease, err := pool.ImportVApp(ctx, spec.ImportSpec, folder, host)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("importing the OVA: %w", err)
	}
	info, err := lease.Wait(ctx, spec.FileItem)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("waiting for the import lease: %w", err)
	}
	return s, lease, info, nil
}

func upload(ctx context.Context, lease *nfc.Lease, info *nfc.LeaseInfo, archive *importer.TapeArchive) error {
	updater := lease.StartUpdater(ctx, info)
	defer updater.Done()
	for _, item := range info.Items {
		f, size, err := archive.Open(item.Path)
		if err != nil {
			return fmt.Errorf("OVA: opening %s: %w", item.Path, err)
		}
		err = lease.Upload(ctx, item, fencedReader{Reader: f, ctx: ctx}, soap.Upload{ContentLength: size})
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("uploading %s: %w", item.Path, err)
		}
	}
	if err := lease.Complete(ctx); err != nil {
		return fmt.Errorf("completing the import lease: %w", err)
	}
	return nil
}

// importHost returns a host of cluster, not in maintenance, that sees network and datastore.
func importHost(ctx context.Context, cluster *object.ClusterComputeResource, network object.NetworkReference, datastore *object.Datastore) (*object.HostSystem, error) {
	hosts, err := cluster.Hosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing hosts of %s: %w", cluster.InventoryPath, err)
	}
	for _, h := range hosts {
		var props mo.HostSystem
		if err := h.Properties(ctx, h.Reference(), []string{"network", "datastore", "runtime"}, &props); err != nil {
			return nil, fmt.Errorf("reading host %s: %w", h.InventoryPath, err)
		}
		// Distributed port groups span hosts; a standard one must be on the host.
		_, standard := network.(*object.Network)
		if props.Runtime.InMaintenanceMode || !hasRef(props.Datastore, datastore.Reference()) || (standard && !hasRef(props.Network, network.Reference())) {
			continue
		}
		return h, nil
	}
	return nil, fmt.Errorf("no host of %s outside maintenance mode sees both the network and datastore %s", cluster.InventoryPath, datastore.InventoryPath)
}

func hasRef(refs []types.ManagedObjectReference, ref types.ManagedObjectReference) bool {
	for _, r := range refs {
		if r.Value == ref.Value {
			return true
		}
	}
	return false
}

// secureBootEnabled reports whether the OVF turns EFI secure boot on.
func secureBootEnabled(e *ovf.Envelope) bool {
	if e.VirtualSystem == nil {
		return false
	}
	for _, hw := range e.VirtualSystem.VirtualHardware {
		for _, c := range hw.Config {
			if c.Key == "bootOptions.efiSecureBootEnabled" && c.Value == "true" {
				return true
			}
		}
	}
	return false
}

// productVersion is the version of the VM's vApp product, which an OVA's product section sets.
func productVersion(vm mo.VirtualMachine) string {
	if vm.Config != nil && vm.Config.VAppConfig != nil {
		if info := vm.Config.VAppConfig.GetVmConfigInfo(); info != nil {
			for _, p := range info.Product {
				if p.Version != "" {
					return p.Version
				}
			}
		}
	}
	if p := vm.Summary.Config.Product; p != nil {
		return p.Version
	}
	return ""
}

// diskType is the provisioning of the VM's flat disks: thin, thick or eagerZeroedThick.
func diskType(vm mo.VirtualMachine) string {
	if vm.Config == nil {
		return ""
	}
	for _, dev := range vm.Config.Hardware.Device {
		disk, ok := dev.(*types.VirtualDisk)
		if !ok {
			continue
		}
		if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok && b.ThinProvisioned != nil {
			switch {
			case *b.ThinProvisioned:
				return "thin"
			case b.EagerlyScrub != nil && *b.EagerlyScrub:
				return "eagerZeroedThick"
			default:
				return "thick"
			}
		}
	}
	return ""
}

// findVM returns the VM name directly inside at.Folder, nil when there is none. The lookup is by
// inventory path, one call, so a VM of the same name in another folder is never found.
func (v *VCenters) findVM(ctx context.Context, at vsphere.Location, name string) (*object.VirtualMachine, error) {
	s, err := v.session(ctx, at)
	if err != nil {
		return nil, err
	}
	p := path.Join(at.Folder, name)
	ref, err := object.NewSearchIndex(s.vim).FindByInventoryPath(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("finding VM %s in vCenter %s: %w", p, at.Server, err)
	}
	if ref == nil {
		return nil, nil
	}
	vm, ok := ref.(*object.VirtualMachine)
	if !ok {
		return nil, fmt.Errorf("%s in vCenter %s is a %s, not a VM", p, at.Server, ref.Reference().Type)
	}
	vm.InventoryPath = p
	return vm, nil
}

func (v *VCenters) vm(ctx context.Context, at vsphere.Location, name string) (*object.VirtualMachine, error) {
	vm, err := v.findVM(ctx, at, name)
	if err == nil && vm == nil {
		err = fmt.Errorf("VM %s not found in %s", name, at.Folder)
	}
	return vm, err
}

func (v *VCenters) finder(ctx context.Context, at vsphere.Location) (*vcenterSession, *find.Finder, error) {
	s, err := v.session(ctx, at)
	if err != nil {
		return nil, nil, err
	}
	finder := find.NewFinder(s.vim, false)
	dc, err := finder.Datacenter(ctx, at.Datacenter)
	if err != nil {
		return nil, nil, fmt.Errorf("finding datacenter %s in vCenter %s: %w", at.Datacenter, at.Server, err)
	}
	return s, finder.SetDatacenter(dc), nil
}

// session returns the session of at's vCenter, logging in when there is none, when the
// credentials changed or when vCenter no longer knows it. The check or login runs once for all
// callers of a server, on a context of its own (one caller giving up does not fail the others),
// and no lock is held while it talks to vCenter.
func (v *VCenters) session(ctx context.Context, at vsphere.Location) (*vcenterSession, error) {
	creds, err := v.Credentials(ctx, at.Server)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	s := v.sessions[at.Server]
	v.mu.Unlock()
	if s != nil && s.version == creds.Version && time.Since(time.Unix(0, s.checked.Load())) < sessionCheckInterval {
		return s, nil
	}
	ch := v.logins.DoChan(at.Server+"\x00"+creds.Version, func() (any, error) {
		ctx, cancel, err := v.call(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		defer cancel()
		return v.renew(ctx, at, creds)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*vcenterSession), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a session of vCenter %s: %w", at.Server, context.Cause(ctx))
	}
}

// renew keeps the cached session of at's vCenter if vCenter still knows it, else replaces it
// with a new login.
func (v *VCenters) renew(ctx context.Context, at vsphere.Location, creds Credentials) (*vcenterSession, error) {
	v.mu.Lock()
	s := v.sessions[at.Server]
	v.mu.Unlock()
	if s != nil && s.version == creds.Version && s.active(ctx) {
		s.checked.Store(time.Now().UnixNano())
		return s, nil
	}
	fresh, err := v.login(ctx, at, creds)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	old, closed := v.sessions[at.Server], v.closed
	if !closed {
		if v.sessions == nil {
			v.sessions = map[string]*vcenterSession{}
		}
		v.sessions[at.Server] = fresh
	}
	v.mu.Unlock()
	if old != nil {
		old.logout(ctx)
	}
	if closed {
		fresh.logout(ctx)
		return nil, fmt.Errorf("vCenter %s: the operator is shutting down", at.Server)
	}
	return fresh, nil
}

func (v *VCenters) login(ctx context.Context, at vsphere.Location, creds Credentials) (*vcenterSession, error) {
	host := at.Server
	if at.Port != 0 {
		host = net.JoinHostPort(at.Server, strconv.Itoa(int(at.Port)))
	}
	u := &url.URL{Scheme: "https", Host: host, Path: vim25.Path}
	sc := soap.NewClient(u, false)
	if v.RootCAs != nil {
		sc.DefaultTransport().TLSClientConfig.RootCAs = v.RootCAs
	}
	vim, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("connecting to vCenter %s: %w", host, err)
	}
	if v.wrapSOAP != nil {
		vim.RoundTripper = v.wrapSOAP(vim.RoundTripper)
	}
	vim.RoundTripper = fencedSOAP{next: vim.RoundTripper}
	user := url.UserPassword(creds.Username, creds.Password)
	manager := session.NewManager(vim)
	if err := manager.Login(ctx, user); err != nil {
		return nil, fmt.Errorf("logging in to vCenter %s as %s: %w", host, creds.Username, err)
	}
	restClient := rest.NewClient(vim)
	if err := restClient.Login(ctx, user); err != nil {
		_ = manager.Logout(ctx)
		return nil, fmt.Errorf("logging in to the vCenter %s REST API as %s: %w", host, creds.Username, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Logged in to vCenter", "server", host, "user", creds.Username)
	s := &vcenterSession{version: creds.Version, vim: vim, manager: manager, rest: restClient}
	s.checked.Store(time.Now().UnixNano())
	return s, nil
}

// active reports whether vCenter still knows both sessions (SOAP and REST expire apart). Reading
// one's own session needs no privilege, unlike SessionIsActive.
func (s *vcenterSession) active(ctx context.Context) bool {
	user, err := s.manager.UserSession(ctx)
	if err != nil || user == nil {
		return false
	}
	r, err := s.rest.Session(ctx)
	return err == nil && r != nil
}

func (s *vcenterSession) logout(ctx context.Context) {
	_ = s.rest.Logout(ctx)
	_ = s.manager.Logout(ctx)
	s.vim.CloseIdleConnections()
}

// Close logs every session out; a login still under way is logged out when it ends.
func (v *VCenters) Close(ctx context.Context) {
	v.mu.Lock()
	sessions := v.sessions
	v.sessions, v.closed = nil, true
	v.mu.Unlock()
	for _, s := range sessions {
		s.logout(ctx)
	}
}

// Start waits for ctx to end, then logs every session out: as a manager Runnable, it ends the
// sessions when the operator shuts down.
func (v *VCenters) Start(ctx context.Context) error {
	<-ctx.Done()
	logout, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v.Close(logout)
	return nil
}

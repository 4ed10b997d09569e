package fakecloud

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	// The vCenter REST API (tags) of the simulator.
	_ "github.com/vmware/govmomi/vapi/simulator"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
)

// The simulated vCenter's inventory (govmomi's VPX model) and the login it accepts.
const (
	VCenterUsername   = "administrator@vsphere.local"
	VCenterPassword   = "vcsim-secret"
	VCenterDatacenter = "DC0"
	VCenterCluster    = "/DC0/host/DC0_C0"
	VCenterPool       = "/DC0/host/DC0_C0/Resources"
	VCenterDatastore  = "/DC0/datastore/LocalDS_0"
	VCenterNetwork    = "VM Network"
)

// VCenter is govmomi's vCenter simulator (vcsim) in process, speaking SOAP and REST over TLS.
type VCenter struct {
	model  *simulator.Model
	server *simulator.Server
	// Server and Port are as Infrastructure lists the vCenter.
	Server string
	Port   int32
	// Client is an administrator's session, for tests to look and change.
	Client *govmomi.Client
	Tags   *tags.Manager
}

// NewVCenter starts a simulator with the VPX inventory: datacenter DC0, cluster DC0_C0,
// datastore LocalDS_0, network "VM Network".
func NewVCenter(ctx context.Context) (*VCenter, error) {
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		return nil, err
	}
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	// Infrastructure accepts vCenter ports up to 32767, below Linux's ephemeral range.
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	model.Service.Listen = &url.URL{Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), User: url.UserPassword(VCenterUsername, VCenterPassword)}
	server := model.Service.NewServer()
	v := &VCenter{model: model, server: server, Server: "127.0.0.1", Port: int32(port)}
	if v.Client, err = govmomi.NewClient(ctx, server.URL, true); err != nil {
		v.Close()
		return nil, err
	}
	rc := rest.NewClient(v.Client.Client)
	if err := rc.Login(ctx, server.URL.User); err != nil {
		v.Close()
		return nil, err
	}
	v.Tags = tags.NewManager(rc)
	return v, nil
}

// freePort returns a TCP port of 127.0.0.1 between 20000 and 32767 that is free now.
func freePort() (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(32767-20000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port between 20000 and 32767")
}

// RootCAs trusts the simulator's certificate.
func (v *VCenter) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(v.server.Certificate())
	return pool
}

// Close stops the simulator.
func (v *VCenter) Close() {
	v.server.Close()
	v.model.Remove()
}

// CreateFolder creates folder name under /DC0/vm and returns its inventory path.
func (v *VCenter) CreateFolder(ctx context.Context, name string) (string, error) {
	finder := find.NewFinder(v.Client.Client, false)
	root, err := finder.Folder(ctx, "/"+VCenterDatacenter+"/vm")
	if err != nil {
		return "", err
	}
	if _, err := root.CreateFolder(ctx, name); err != nil {
		return "", err
	}
	return root.InventoryPath + "/" + name, nil
}

// CreateResourcePool creates resource pool name in the cluster's root pool, as a second failure
// domain of the same cluster has, and returns its inventory path.
func (v *VCenter) CreateResourcePool(ctx context.Context, name string) (string, error) {
	root, err := find.NewFinder(v.Client.Client, false).ResourcePool(ctx, VCenterPool)
	if err != nil {
		return "", err
	}
	if _, err := root.Create(ctx, name, types.DefaultResourceConfigSpec()); err != nil {
		return "", err
	}
	return VCenterPool + "/" + name, nil
}

// ClusterFolder prepares vCenter for a cluster as the installer does: its folder under /DC0/vm and
// its tag, both named infrastructureName. It returns the folder's inventory path.
func (v *VCenter) ClusterFolder(ctx context.Context, infrastructureName string) (string, error) {
	folder, err := v.CreateFolder(ctx, infrastructureName)
	if err != nil {
		return "", err
	}
	return folder, v.CreateTag(ctx, infrastructureName)
}

// Credentials returns the simulator's login, as the operator reads it, with version.
func (v *VCenter) Credentials(version string) func(context.Context, string) (vspherecloud.Credentials, error) {
	return func(context.Context, string) (vspherecloud.Credentials, error) {
		return vspherecloud.Credentials{Version: version, Username: VCenterUsername, Password: VCenterPassword}, nil
	}
}

// CreateTag creates tag name in category openshift-<name>, as the installer tags a cluster.
func (v *VCenter) CreateTag(ctx context.Context, name string) error {
	category, err := v.Tags.CreateCategory(ctx, &tags.Category{Name: "openshift-" + name, Cardinality: "SINGLE", AssociableTypes: []string{"VirtualMachine"}})
	if err != nil {
		return err
	}
	_, err = v.Tags.CreateTag(ctx, &tags.Tag{Name: name, CategoryID: category})
	return err
}

// VMs returns the names of the VMs directly in folder.
func (v *VCenter) VMs(ctx context.Context, folder string) ([]string, error) {
	finder := find.NewFinder(v.Client.Client, false)
	vms, err := finder.VirtualMachineList(ctx, folder+"/*")
	if _, ok := err.(*find.NotFoundError); ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, vm := range vms {
		names = append(names, vm.Name())
	}
	return names, nil
}

// VM returns the VM at inventory path p, with its tags.
func (v *VCenter) VM(ctx context.Context, p string) (*mo.VirtualMachine, []string, error) {
	vm, err := find.NewFinder(v.Client.Client, false).VirtualMachine(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), nil, &props); err != nil {
		return nil, nil, err
	}
	attached, err := v.Tags.GetAttachedTags(ctx, vm.Reference())
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, t := range attached {
		names = append(names, t.Name)
	}
	return &props, names, nil
}

// Rename renames the VM at inventory path p.
func (v *VCenter) Rename(ctx context.Context, p, name string) error {
	vm, err := find.NewFinder(v.Client.Client, false).VirtualMachine(ctx, p)
	if err != nil {
		return err
	}
	task, err := vm.Rename(ctx, name)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// Destroy deletes the VM at inventory path p.
func (v *VCenter) Destroy(ctx context.Context, p string) error {
	vm, err := find.NewFinder(v.Client.Client, false).VirtualMachine(ctx, p)
	if err != nil {
		return err
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// Sessions counts the sessions of user.
func (v *VCenter) Sessions(ctx context.Context, user string) (int, error) {
	var sm mo.SessionManager
	if err := v.Client.RetrieveOne(ctx, *v.Client.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range sm.SessionList {
		if s.UserName == user {
			n++
		}
	}
	return n, nil
}

// CAFile writes the simulator's certificate as PEM and returns the file's path.
func (v *VCenter) CAFile() (string, error) {
	return v.server.CertificateFile()
}

// SeedTemplate imports an OVA of RHCOS release as template name into folder, tagged with
// infrastructureName, as the installer does, through the operator's own adapter.
func (v *VCenter) SeedTemplate(ctx context.Context, folder, name, release, infrastructureName string) error {
	f, err := os.CreateTemp("", "seed-*.ova")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(OVA(release)); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	admin := &vspherecloud.VCenters{RootCAs: v.RootCAs(), Credentials: v.Credentials("seed")}
	defer admin.Close(ctx)
	imp := vsphere.Import{
		Location:       vsphere.Location{Server: v.Server, Port: v.Port, Datacenter: VCenterDatacenter, Folder: folder},
		ComputeCluster: VCenterCluster, ResourcePool: VCenterPool, Datastore: VCenterDatastore, Network: VCenterNetwork,
		InfrastructureName: infrastructureName,
	}
	return admin.ImportTemplate(ctx, imp, name, f.Name(), "thick")
}

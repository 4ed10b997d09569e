package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
)

// loadFiles reads every YAML or JSON document of paths (files, folders of *.yaml, *.yml and
// *.json, or - for stdin), unpacking List kinds, into typed objects of scheme. It refuses a kind
// the plan does not read and a field its type does not have, naming the file, document and field.
func loadFiles(scheme *runtime.Scheme, paths []string, stdin io.Reader) ([]client.Object, error) {
	in := &input{stdin: stdin}
	var objs []client.Object
	for _, p := range paths {
		files := []string{p}
		if p != "-" {
			var err error
			if files, err = expand(p); err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			name, data, err := in.read("-f", f)
			if err != nil {
				return nil, err
			}
			got, err := decodeAll(scheme, name, bytes.NewReader(data))
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
		}
	}
	return objs, nil
}

func expand(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	return files, err
}

func decodeAll(scheme *runtime.Scheme, path string, r io.Reader) ([]client.Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var objs []client.Object
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %v", path, doc, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		got, err := typed(scheme, u)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %v", path, doc, err)
		}
		objs = append(objs, got...)
	}
}

// typed converts u, or each item of a List, into the scheme's type, strictly.
func typed(scheme *runtime.Scheme, u *unstructured.Unstructured) ([]client.Object, error) {
	if u.IsList() {
		list, err := u.ToList()
		if err != nil {
			return nil, err
		}
		var out []client.Object
		for i := range list.Items {
			got, err := typed(scheme, &list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		return out, nil
	}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" {
		return nil, fmt.Errorf("document has no kind")
	}
	if clusterAPIKinds[gvk.GroupKind()] {
		// No Cluster API type is compiled in: kept as read, as the operator reads them, with
		// numbers as int64 as a client decodes them (YAML gives float64).
		data, err := json.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
		return []client.Object{obj.(*unstructured.Unstructured)}, nil
	}
	if !wanted[gvk.Kind] {
		return nil, fmt.Errorf("%s %s: not a kind the plan reads (%s; %s)", gvk.Kind, u.GetName(), wantedKinds, clusterAPIKindNames)
	}
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s %s: apiVersion %s has no kind %s; it is read as apiVersion %s", gvk.Kind, u.GetName(), gvk.GroupVersion(), gvk.Kind, knownVersions(scheme, gvk.Kind))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return nil, fmt.Errorf("%s %s: %v", gvk.Kind, u.GetName(), err)
	}
	return []client.Object{obj.(client.Object)}, nil
}

// wantedKinds are the kinds a plan reads.
const wantedKinds = "Infrastructure, FeatureGate, ClusterVersion, MachineConfiguration, ConfigMap, MachineSet, ControlPlaneMachineSet, Secret, Node, MachineConfigPool, OSImageStream"

// clusterAPIKinds are the Cluster API kinds a plan reads, by group: the owners, their Clusters
// (for the pause) and the infrastructure machine templates of the registered platforms.
var clusterAPIKinds = func() map[schema.GroupKind]bool {
	m := map[schema.GroupKind]bool{}
	for _, k := range []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment, "Cluster"} {
		m[schema.GroupKind{Group: string(bootimage.ClusterAPIGroup), Kind: k}] = true
	}
	for _, k := range bootimage.TemplateKinds() {
		m[schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: k}] = true
	}
	return m
}()

// clusterAPIKindNames names clusterAPIKinds.
var clusterAPIKindNames = string(bootimage.ClusterAPIGroup) + " MachineSet, MachineDeployment, Cluster; " +
	clusterapi.InfrastructureGroup + " " + strings.Join(bootimage.TemplateKinds(), ", ")

var wanted = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Split(wantedKinds, ", ") {
		m[k] = true
	}
	return m
}()

// knownVersions names the apiVersions the scheme reads kind in.
func knownVersions(scheme *runtime.Scheme, kind string) string {
	var versions []string
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Kind == kind && gvk.Version != runtime.APIVersionInternal {
			versions = append(versions, gvk.GroupVersion().String())
		}
	}
	slices.Sort(versions)
	return strings.Join(versions, " or ")
}

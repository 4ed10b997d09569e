package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

// managedObject is an object whose boot image the operator writes, as history and restore read
// it: a Machine API one, or a Cluster API one (APIGroup set; its spec is read from its template).
type managedObject struct {
	Kind      string `json:"kind"`
	APIGroup  string `json:"apiGroup,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	obj       client.Object
	// providerSpec is its providerSpec.value, and prefix where that sits, for JSON Patch ("" for
	// Cluster API, whose changes' paths are from the object's root).
	providerSpec []byte
	prefix       string
	History      bootimage.History `json:"history"`
}

// objectRef parses kind/name as kubectl spells them: machineset/NAME, controlplanemachineset/cluster,
// and for Cluster API objects machineset.cluster.x-k8s.io/NAME or
// machinedeployment.cluster.x-k8s.io/NAME, whose kind it returns qualified (Kind.group).
func objectRef(arg string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(arg, "/")
	switch strings.ToLower(kind) {
	case "machineset", "machinesets", "machinesets.machine.openshift.io", "ms":
		kind = bootimage.KindMachineSet
	case "controlplanemachineset", "controlplanemachinesets", "cpms":
		kind = bootimage.KindControlPlaneMachineSet
	case "machineset.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io":
		kind = bootimage.KindMachineSet + "." + string(bootimage.ClusterAPIGroup)
	case "machinedeployment.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machinedeployment", "machinedeployments", "md":
		kind = bootimage.KindMachineDeployment + "." + string(bootimage.ClusterAPIGroup)
	default:
		ok = false
	}
	if !ok || name == "" {
		return "", "", fmt.Errorf("%q: give machineset/NAME or controlplanemachineset/cluster (Machine API objects of %s), or machineset.cluster.x-k8s.io/NAME or machinedeployment.cluster.x-k8s.io/NAME (Cluster API objects of %s)", arg, kube.MachineAPINamespace, bootimage.ClusterAPINamespace)
	}
	return kind, name, nil
}

// readManaged reads the object kind/name and its history: of openshift-machine-api, or of
// openshift-cluster-api for a qualified (Cluster API) kind.
func readManaged(ctx context.Context, c client.Reader, kind, name string) (managedObject, error) {
	if k, group, capi := strings.Cut(kind, "."); capi {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(k))
		m := managedObject{Kind: k, APIGroup: group, Namespace: bootimage.ClusterAPINamespace, Name: name, obj: u}
		if err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: name}, u); err != nil {
			return m, err
		}
		var err error
		m.History, err = bootimage.HistoryOf(u.GetAnnotations())
		return m, err
	}
	key := types.NamespacedName{Namespace: kube.MachineAPINamespace, Name: name}
	// The Machine API objects live there only; -n is accepted for the kubectl habit.
	m := managedObject{Kind: kind, Namespace: kube.MachineAPINamespace, Name: name}
	if kind == bootimage.KindMachineSet {
		ms := &machinev1beta1.MachineSet{}
		if err := c.Get(ctx, key, ms); err != nil {
			return m, err
		}
		m.obj, m.prefix = ms, "/spec/template/spec/providerSpec/value"
		if v := ms.Spec.Template.Spec.ProviderSpec.Value; v != nil {
			m.providerSpec = v.Raw
		}
	} else {
		cp := &machinev1.ControlPlaneMachineSet{}
		if err := c.Get(ctx, key, cp); err != nil {
			return m, err
		}
		m.obj, m.prefix = cp, cpms.ProviderSpecPath
		if v := cp.Spec.Template.OpenShiftMachineV1Beta1Machine; v != nil && v.Spec.ProviderSpec.Value != nil {
			m.providerSpec = v.Spec.ProviderSpec.Value.Raw
		}
	}
	var err error
	m.History, err = bootimage.HistoryOf(m.obj.GetAnnotations())
	return m, err
}

// namespaceFlag accepts -n as kubectl does, for the one namespace each API's objects live in.
func namespaceFlag(cmd *cobra.Command) *string {
	return cmd.Flags().StringP("namespace", "n", "", "The object's namespace: "+kube.MachineAPINamespace+", the only one the Machine API uses, or "+bootimage.ClusterAPINamespace+" for a Cluster API object (the default).")
}

// checkNamespace refuses a namespace an object of kind (qualified for Cluster API) cannot be in.
func checkNamespace(ns, kind string) error {
	switch {
	case ns == "":
	case strings.Contains(kind, "."):
		if ns != bootimage.ClusterAPINamespace {
			return unusable("namespace %q: the Cluster API objects are in %s", ns, bootimage.ClusterAPINamespace)
		}
	case ns != kube.MachineAPINamespace:
		return unusable("namespace %q: the Machine API objects are in %s", ns, kube.MachineAPINamespace)
	}
	return nil
}

// resolveObject parses KIND/NAME, checks the namespace given for it, and connects to the cluster.
func resolveObject(cluster *clusterFlags, arg, namespace string) (c client.Client, kind, name string, err error) {
	if kind, name, err = objectRef(arg); err != nil {
		return nil, "", "", unusable("%v", err)
	}
	if err := checkNamespace(namespace, kind); err != nil {
		return nil, "", "", err
	}
	if c, err = liveClient(cluster); err != nil {
		return nil, "", "", unusable("%v", err)
	}
	return c, kind, name, nil
}

func newHistoryCommand(cluster *clusterFlags, stdout io.Writer) *cobra.Command {
	var output string
	var namespace *string
	cmd := &cobra.Command{
		Use:   "history KIND/NAME",
		Short: "The boot image changes recorded on a MachineSet or the ControlPlaneMachineSet",
		Long: `History prints the boot image changes the operator recorded on the object (annotation
` + bootimage.HistoryAnnotation + `, the newest ` + fmt.Sprint(bootimage.HistoryLength) + `): when, by whom, from which image to which, and
what the machines said of it (Verified, Failed with the machine and its error, or Pending), and
the hold, if any. It writes nothing.`,
		Example: `  bootimagectl history machineset/worker-us-east-1a
  bootimagectl history controlplanemachineset/cluster -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "table", "json", "yaml"); err != nil {
				return err
			}
			c, kind, name, err := resolveObject(cluster, args[0], *namespace)
			if err != nil {
				return err
			}
			m, err := readManaged(cmd.Context(), c, kind, name)
			if err != nil {
				return unusable("%v", err)
			}
			return printHistory(stdout, m, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table, json or yaml.")
	namespace = namespaceFlag(cmd)
	return cmd
}

// liveClient is a client of the cluster the flags name.
func liveClient(cluster *clusterFlags) (client.Client, error) {
	cfg, err := cluster.restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: kube.NewScheme()})
}

func printHistory(w io.Writer, m managedObject, output string) error {
	hold, held, holdErr := bootimage.HoldOf(m.obj.GetAnnotations())
	switch output {
	case "json", "yaml":
		out := struct {
			managedObject
			Hold *bootimage.Hold `json:"hold,omitempty"`
		}{managedObject: m}
		if held {
			out.Hold = &hold
		}
		raw, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		if output == "yaml" {
			if raw, err = yaml.JSONToYAML(raw); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintln(w, string(raw))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tBY\tFROM\tTO\tOUTCOME\tMACHINE\tERROR")
	for _, c := range m.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.At.UTC().Format(time.RFC3339), c.By, c.From, c.To, changeOutcome(c), orDash(c.Machine), orDash(c.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case holdErr != nil:
		fmt.Fprintf(w, "\nHold: unreadable: %v\n", holdErr)
	case held:
		clear := bootimage.ClearCommand(bootimage.Decision{Kind: m.Kind, APIGroup: m.APIGroup, Namespace: m.Namespace, Name: m.Name})
		fmt.Fprintf(w, "\nHold: %s is not written to this object (%s at %s) until the stream moves past it or the hold is cleared:\n  %s\n",
			hold.Target, hold.By, hold.At.UTC().Format(time.RFC3339), clear)
	}
	return nil
}

func changeOutcome(c bootimage.Change) string {
	if c.By != bootimage.ByOperator {
		return "-"
	}
	return c.State()
}

func newRestoreCommand(cluster *clusterFlags, stdout io.Writer) *cobra.Command {
	var apply bool
	var namespace *string
	cmd := &cobra.Command{
		Use:   "restore KIND/NAME",
		Short: "Put a MachineSet, MachineDeployment or the ControlPlaneMachineSet back on the boot image it had before",
		Long: `Restore undoes the newest boot image change the operator recorded on the object, and holds the
image it undoes: the operator does not write it to the object again until the stream moves past
it or the hold is cleared (oc annotate KIND/NAME -n NAMESPACE ` + bootimage.HoldAnnotation + `-).
A Cluster API MachineSet or MachineDeployment is pointed back at the template the change moved
it from; it is refused if it was moved since or that template is gone.

Without --apply it prints what it would write and writes nothing. With --apply it writes one
patch with optimistic locking: if the object changed since it was read, nothing is written.

Exit status: 0 when planned or written, 2 when there is nothing to restore or the object
cannot be read or written.`,
		Example: `  bootimagectl restore machineset/worker-us-east-1a
  bootimagectl restore machineset/worker-us-east-1a --apply
  bootimagectl restore machineset.cluster.x-k8s.io/worker-us-east-1a --apply`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, kind, name, err := resolveObject(cluster, args[0], *namespace)
			if err != nil {
				return err
			}
			return runRestore(cmd.Context(), c, kind, name, apply, time.Now(), stdout)
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "Write the restore; without it, only print it.")
	namespace = namespaceFlag(cmd)
	return cmd
}

// runRestore plans, and with apply writes, the restore of kind/name.
func runRestore(ctx context.Context, c client.Client, kind, name string, apply bool, now time.Time, w io.Writer) error {
	m, err := readManaged(ctx, c, kind, name)
	if err != nil {
		return unusable("%v", err)
	}
	ref := fmt.Sprintf("%s/%s", strings.ToLower(kind), name)
	patch, what, err := restorePatch(ctx, c, m, now)
	if err != nil {
		return unusable("%s: %v", ref, err)
	}
	fmt.Fprintf(w, "%s: %s\n", ref, what)
	if !apply {
		fmt.Fprintf(w, "Nothing written. To write it: bootimagectl restore %s --apply\n", ref)
		return nil
	}
	if err := c.Patch(ctx, m.obj, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(status.FieldManager)); err != nil {
		return unusable("%s: %v", ref, err)
	}
	clear := bootimage.ClearCommand(bootimage.Decision{Kind: m.Kind, APIGroup: m.APIGroup, Namespace: m.Namespace, Name: m.Name})
	fmt.Fprintf(w, "Restored. Clear the hold with: %s\n", clear)
	return nil
}

// restorePatch is the patch that undoes m's newest change and holds its image, and what it does.
func restorePatch(ctx context.Context, c client.Client, m managedObject, now time.Time) ([]byte, string, error) {
	change, ok := m.History.Newest()
	// A Cluster API change is undone by moving its template back; a Machine API one moves none.
	ofThisAPI := (m.APIGroup != "") == (change.Template != nil)
	if !ok || len(change.Revert) == 0 || change.By == bootimage.ByRestore || change.By == bootimage.ByHand || !ofThisAPI {
		return nil, "", fmt.Errorf("no boot image change to undo in annotation %s (a restore is not undone: edit the object instead)", bootimage.HistoryAnnotation)
	}
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		return nil, "", fmt.Errorf("reading Infrastructure/cluster for the platform: %w", err)
	}
	platform := bootimage.PlatformOf(infra)
	what := fmt.Sprintf("boot image %s -> %s", change.To, change.From)
	if m.APIGroup != "" {
		var err error
		if what, err = templateRestore(ctx, c, m.obj.(*unstructured.Unstructured), change, platform); err != nil {
			return nil, "", err
		}
	} else if current := bootimage.CurrentImage(platform, bootimage.Object{ProviderSpec: m.providerSpec}); current != change.To {
		return nil, "", fmt.Errorf("its boot image is %q, not %q which the newest change wrote: it was changed since, so undoing the change could undo that too", current, change.To)
	}
	what += fmt.Sprintf(" (undoes the change of %s by %s); holds %s", change.At.UTC().Format(time.RFC3339), change.By, change.To)
	// A Cluster API change's Revert is from the owner's root: its prefix is "".
	patch, err := bootimage.RestorePatch(m.prefix, m.obj.GetResourceVersion(), m.obj.GetAnnotations(), m.History, bootimage.Hold{By: bootimage.ByHand, At: now.UTC()})
	return patch, what, err
}

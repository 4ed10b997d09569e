package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

type refreshPlanOptions struct {
	oldPath, newPath, policiesPath, pathsPath string
	file, deleted, pool                       string
	output                                    string
	exitCode                                  bool
	stdin                                     io.Reader
}

func newRefreshPlanCommand(cluster *clusterFlags, stdout io.Writer) *cobra.Command {
	var o refreshPlanOptions
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Whether a worker config change can be applied in place, and which actions follow",
		Long: `Refresh plan decides, with the MCO's node disruption rules, whether a config change needs a
reboot, can be applied in place (and with which actions), or cannot be applied at all.

On a cluster (-f or --delete) it previews applying the MachineConfigs of a file (every document,
applied together as oc apply applies them; -f - reads stdin) or deleting one MachineConfig, on
every MachineConfigPool that renders them, with the cluster's policies, reading only. With --old and
--new it compares two configs (MachineConfigs or Ignition JSON) with the default policies,
or those of --policies.

Exit status: 0 when the plan was computed (with --exit-code: 3 when a pool reboots, 4 when the
change is rejected), 2 when the input is unusable.`,
		Example: `  bootimagectl refresh plan -f 99-worker-chrony.yaml
  oc get mc 99-worker-chrony -o yaml | bootimagectl refresh plan -f -
  bootimagectl refresh plan --delete 99-worker-old --pool worker -o json
  bootimagectl refresh plan --old rendered-worker-1.yaml --new rendered-worker-2.yaml --exit-code`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdin = cmd.InOrStdin()
			return runRefreshPlan(cmd.Context(), o, cluster, stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.file, "filename", "f", "", "MachineConfigs (YAML documents or JSON; - reads stdin) to preview applying on the cluster, all together.")
	fs.StringVar(&o.deleted, "delete", "", "The name of a MachineConfig to preview deleting from the cluster.")
	fs.StringVar(&o.pool, "pool", "", "Only this MachineConfigPool (with -f or --delete).")
	fs.StringVar(&o.oldPath, "old", "", "Without a cluster: the node's current config, a MachineConfig (YAML or JSON) or Ignition JSON.")
	fs.StringVar(&o.newPath, "new", "", "Without a cluster: the config to apply, in the same forms.")
	fs.StringVar(&o.policiesPath, "policies", "", "With --old/--new: a MachineConfiguration cluster whose spec.nodeDisruptionPolicy is merged with the defaults.")
	fs.StringVar(&o.pathsPath, "no-reboot-paths", "", "With --old/--new: a no-reboot-paths JSON array; file decisions come from it (reboot triggers and rejections still apply).")
	fs.StringVarP(&o.output, "output", "o", "table", "Output format: table, json or yaml.")
	fs.BoolVar(&o.exitCode, "exit-code", false, "Exit 3 when the outcome (of any pool) is Reboot and 4 when it is Reject, so a script can stop before oc apply.")
	return cmd
}

// runRefreshPlan is `bootimagectl refresh plan`: two files (--old, --new), or a cluster (-f, --delete).
func runRefreshPlan(ctx context.Context, o refreshPlanOptions, cluster *clusterFlags, stdout io.Writer) error {
	if err := checkOutput(o.output, "table", "json", "yaml"); err != nil {
		return err
	}
	files := o.oldPath != "" || o.newPath != ""
	live := o.file != "" || o.deleted != ""
	switch {
	case files && (live || o.pool != ""):
		return unusable("--old/--new compare two files; -f, --delete and --pool read a cluster: give one or the other")
	case files && (o.oldPath == "" || o.newPath == ""):
		return unusable("--old and --new are required together")
	case files:
		return runRefreshPlanFiles(o, stdout)
	case o.policiesPath != "" || o.pathsPath != "":
		return unusable("--policies and --no-reboot-paths go with --old/--new; on a cluster its own policies apply")
	case o.file != "" && o.deleted != "":
		return unusable("give one of -f FILE and --delete NAME")
	case !live:
		return unusable("give -f FILE or --delete NAME to preview a MachineConfig on the cluster, or --old FILE --new FILE")
	}
	return runRefreshPlanLive(ctx, o, cluster, stdout)
}

func runRefreshPlanFiles(o refreshPlanOptions, stdout io.Writer) error {
	in := &input{stdin: o.stdin}
	oldCfg, err := parseConfigFile(in, "--old", o.oldPath)
	if err != nil {
		return unusable("%v", err)
	}
	newCfg, err := parseConfigFile(in, "--new", o.newPath)
	if err != nil {
		return unusable("%v", err)
	}
	policies := refresh.DefaultPolicies()
	if o.policiesPath != "" {
		data, err := readOne(in, "--policies", o.policiesPath)
		if err != nil {
			return unusable("%v", err)
		}
		var mc operatorv1.MachineConfiguration
		if err := yaml.UnmarshalStrict(data, &mc); err != nil || (mc.Kind != "" && mc.Kind != "MachineConfiguration") {
			return unusable("%s: not a MachineConfiguration: %v", o.policiesPath, orKind(err, mc.Kind))
		}
		// The MCO reads node disruption policies from MachineConfiguration/cluster only.
		if mc.Name != "cluster" {
			return unusable("%s: MachineConfiguration %q is not read by the MCO: node disruption policies must be in the one named cluster", o.policiesPath, mc.Name)
		}
		if policies, err = refresh.MergePolicies(mc.Spec.NodeDisruptionPolicy); err != nil {
			return unusable("%s: %v", o.policiesPath, err)
		}
	}
	changes, err := refresh.Diff(oldCfg, newCfg)
	if err != nil {
		return unusable("%v", err)
	}
	res := refresh.Decide(changes, policies)
	if o.pathsPath != "" {
		data, err := readOne(in, "--no-reboot-paths", o.pathsPath)
		if err != nil {
			return unusable("%v", err)
		}
		paths, err := hypershift.ParseNoRebootPaths(data)
		if err != nil {
			return unusable("%s: %v", o.pathsPath, err)
		}
		res = hypershift.DecideWithNoRebootPaths(changes, policies, paths, hypershift.AllowedServices(policies))
	}
	if err := printRefresh(stdout, res, o.output); err != nil {
		return unusable("%v", err)
	}
	return outcomeExit(o.exitCode, res.Outcome)
}

// outcomeExit is the --exit-code of the worst of outcomes.
func outcomeExit(enabled bool, outcomes ...refresh.Outcome) error {
	if !enabled {
		return nil
	}
	code := exitOK
	for _, o := range outcomes {
		switch o {
		case refresh.Reject:
			code = exitReject
		case refresh.Reboot:
			code = max(code, exitReboot)
		}
	}
	if code == exitOK {
		return nil
	}
	return exitError{code: code}
}

// orKind is err, or else a message naming the unexpected kind.
func orKind(err error, kind string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("kind is %s", kind)
}

// readOne reads the one document of path, given to flag.
func readOne(in *input, flag, path string) ([]byte, error) {
	name, data, err := in.read(flag, path)
	if err != nil {
		return nil, err
	}
	return oneDocument(flag, name, data)
}

// parseConfigFile reads a config for the file mode, given to flag: a MachineConfig, decoded as
// strictly as in live mode so a misspelt field is named rather than ignored, or bare Ignition.
func parseConfigFile(in *input, flag, path string) (refresh.Config, error) {
	data, err := readOne(in, flag, path)
	if err != nil {
		return refresh.Config{}, err
	}
	if path == "-" {
		path = "stdin"
	}
	var cfg refresh.Config
	if isMachineConfig(data) {
		mc, decodeErr := decodeMachineConfig(liveScheme(), path, data)
		if decodeErr != nil {
			return refresh.Config{}, decodeErr
		}
		// The outer err, which the check below reports with the path.
		cfg, err = refresh.FromMachineConfig(mc)
	} else {
		cfg, err = refresh.Parse(data)
	}
	if err != nil {
		return refresh.Config{}, fmt.Errorf("%s: %v", path, err)
	}
	return cfg, nil
}

// isMachineConfig reports whether data is a document of kind MachineConfig.
func isMachineConfig(data []byte) bool {
	var probe struct {
		Kind string `json:"kind"`
	}
	return yaml.Unmarshal(data, &probe) == nil && probe.Kind == "MachineConfig"
}

func printRefresh(w io.Writer, res refresh.Result, format string) error {
	if format == "json" || format == "yaml" {
		return printStructured(w, res, format)
	}
	fmt.Fprintf(w, "Outcome: %s\n", res.Outcome)
	for _, a := range res.Actions {
		fmt.Fprintln(w, strings.TrimSpace("Action:  "+string(a.Type)+" "+a.Unit))
	}
	if len(res.Changes) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tDECISION\tRULE")
	for _, c := range res.Changes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Kind, c.Name, c.Decision, c.Rule)
	}
	return tw.Flush()
}

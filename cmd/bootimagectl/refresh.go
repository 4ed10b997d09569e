package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	operatorv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// runRefreshPlan is `bootimagectl refresh plan`.
func runRefreshPlan(args []string, stdout, stderr io.Writer) int {
	if wantsLiveRefreshPlan(args) {
		return runRefreshPlanLive(context.Background(), args, stdout, stderr)
	}
	fs := flag.NewFlagSet("bootimagectl refresh plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	oldPath := fs.String("old", "", "The node's current config: a MachineConfig (YAML or JSON) or Ignition JSON.")
	newPath := fs.String("new", "", "The config to apply, in the same forms.")
	policiesPath := fs.String("policies", "", "A MachineConfiguration whose spec.nodeDisruptionPolicy is merged with the cluster defaults.")
	pathsPath := fs.String("no-reboot-paths", "", "A no-reboot-paths JSON array: file decisions come from it (reboot triggers and rejections still apply).")
	output := fs.String("o", "table", "Output format: table or json.")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := failure(stderr, "bootimagectl refresh plan")
	if *oldPath == "" || *newPath == "" {
		return fail("--old and --new are required")
	}
	if *output != "table" && *output != "json" {
		return fail("-o must be table or json, not %q", *output)
	}
	oldCfg, err := parseConfigFile(*oldPath)
	if err != nil {
		return fail("%v", err)
	}
	newCfg, err := parseConfigFile(*newPath)
	if err != nil {
		return fail("%v", err)
	}
	policies := refresh.DefaultPolicies()
	if *policiesPath != "" {
		data, err := os.ReadFile(*policiesPath)
		if err != nil {
			return fail("%v", err)
		}
		var mc operatorv1.MachineConfiguration
		if err := yaml.UnmarshalStrict(data, &mc); err != nil || (mc.Kind != "" && mc.Kind != "MachineConfiguration") {
			return fail("%s: not a MachineConfiguration: %v", *policiesPath, orKind(err, mc.Kind))
		}
		// The MCO reads node disruption policies from MachineConfiguration/cluster only.
		if mc.Name != "cluster" {
			return fail("%s: MachineConfiguration %q is not read by the MCO: node disruption policies must be in the one named cluster", *policiesPath, mc.Name)
		}
		if policies, err = refresh.MergePolicies(mc.Spec.NodeDisruptionPolicy); err != nil {
			return fail("%s: %v", *policiesPath, err)
		}
	}
	changes, err := refresh.Diff(oldCfg, newCfg)
	if err != nil {
		return fail("%v", err)
	}
	res := refresh.Decide(changes, policies)
	if *pathsPath != "" {
		data, err := os.ReadFile(*pathsPath)
		if err != nil {
			return fail("%v", err)
		}
		paths, err := refresh.ParseNoRebootPaths(data)
		if err != nil {
			return fail("%s: %v", *pathsPath, err)
		}
		res = refresh.DecideWithNoRebootPaths(changes, policies, paths, refresh.AllowedServices(policies))
	}
	if err := printRefresh(stdout, res, *output); err != nil {
		return fail("%v", err)
	}
	return exitOK
}

// orKind is err, or else a message naming the unexpected kind.
func orKind(err error, kind string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("kind is %s", kind)
}

func parseConfigFile(path string) (refresh.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return refresh.Config{}, err
	}
	cfg, err := refresh.Parse(data)
	if err != nil {
		return refresh.Config{}, fmt.Errorf("%s: %v", path, err)
	}
	return cfg, nil
}

func printRefresh(w io.Writer, res refresh.Result, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
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

// Package runconfig is the contract between the aerie controller and the
// runner in a pod: the runner configuration the controller renders into an
// immutable ConfigMap (Config, a YAML file), the report the runner leaves in
// its termination message for the controller to read back (Report), and the
// encoding of a directory tree, executable files included, in the keys of a
// layer ConfigMap (LayerFiles).
//
// Both sides import this package and nothing of each other, so the controller
// never needs the runner's dependencies and the runner never needs the
// Kubernetes API.
package runconfig

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"sigs.k8s.io/yaml"
)

// APIVersion and Kind identify a runner configuration file, so that a file of
// another format (or a later version of this one) is refused by name rather
// than misread.
const (
	APIVersion = "runner.aerie.run/v1"
	Kind       = "RunnerConfig"
)

// Paths in the runner pod, shared by the pod the controller builds and the
// runner that reads them.
const (
	// Dir is where the runner configuration ConfigMap is mounted.
	Dir = "/etc/aerie/runner"
	// FileName is the configuration's key in the ConfigMap and its file name.
	FileName = "config.yaml"
	// DefaultPath is the configuration file the runner reads by default.
	DefaultPath = Dir + "/" + FileName
	// LayersDir holds the extension layers, one numbered directory each.
	LayersDir = "/etc/aerie/layers"
	// SocketDir is the shared emptyDir that holds the executor's socket.
	SocketDir = "/run/aerie"
	// DefaultSocket is the executor's socket.
	DefaultSocket = SocketDir + "/executor.sock"
	// DefaultWorkspace is the workspace root, owned by the executor.
	DefaultWorkspace = "/workspace"
	// DefaultTerminationLog is where the runner writes its Report.
	DefaultTerminationLog = "/dev/termination-log"
)

// LayerDir is the mount path of the n-th layer (counted from 0).
func LayerDir(n int) string { return fmt.Sprintf("%s/%d", LayersDir, n) }

// Provider names, as AgentSession's spec.model.provider spells them.
const (
	ProviderAnthropic        = "anthropic"
	ProviderOpenAI           = "openai"
	ProviderOpenAICompatible = "openai-compatible"
	ProviderScripted         = "scripted"
)

// Hook approval policies, as AgentSession's spec.hookApproval spells them
// and aerie run's --hook-approval takes them.
const (
	HookApprovalDeny  = "deny"
	HookApprovalAllow = "allow"
	HookApprovalAsk   = "ask"
)

// APIKeyEnv is the environment variable that carries the provider's API key
// into the agent container, the same one `aerie run` reads; empty for a
// provider that takes none.
func APIKeyEnv(provider string) string {
	switch provider {
	case ProviderAnthropic:
		return "ANTHROPIC_API_KEY"
	case ProviderOpenAI, ProviderOpenAICompatible:
		return "OPENAI_API_KEY"
	}
	return ""
}

// DatabaseURLEnv carries the session store's DSN into the agent container.
const DatabaseURLEnv = "AERIE_DATABASE_URL"

// Config is what one attempt of an AgentSession runs: everything the runner
// needs besides its two secrets (the model API key and the database DSN),
// which come as environment variables.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// Namespace is the AgentSession's namespace: the tenant of its
	// sessions in the store.
	Namespace string `json:"namespace"`
	// AgentSession is the AgentSession's name; new sessions are labelled
	// with it in the store.
	AgentSession string `json:"agentSession"`

	Session Session `json:"session"`

	// Prompt is the task, with promptFrom already resolved by the
	// controller. Empty only when the session continues another one.
	Prompt string `json:"prompt,omitempty"`

	Model Model `json:"model"`

	// Toolset and Persona select from the layers' toolsets and personas.
	Toolset string `json:"toolset,omitempty"`
	Persona string `json:"persona,omitempty"`

	// HookApproval is the policy for tool calls a hook asks a person to
	// approve: "deny" (also when empty), "allow" or "ask" (the session
	// pauses, awaiting_approval, until a decision in Approvals).
	HookApproval string `json:"hookApproval,omitempty"`

	// Approvals are the decisions on tool calls the session paused on
	// (an AgentSession's spec.approvals, and the denials of its
	// approvalTimeout), in order: a resumed session runs or refuses its
	// pending call as the last decision for it says.
	Approvals []Approval `json:"approvals,omitempty"`

	// Layers are the extension layers mounted in the pod, nearest first
	// (spec, then namespace, then platform).
	Layers []Layer `json:"layers,omitempty"`

	Trust Trust `json:"trust,omitempty"`

	// Secrets are the names of the agent container's environment
	// variables that the session's spec.secrets fills from Secret keys.
	// Only these resolve a ${NAME} in an extension's MCP headers and env;
	// their values never reach the workspace container, a layer, a log or
	// an event.
	Secrets []string `json:"secrets,omitempty"`

	Budget Budget `json:"budget,omitempty"`

	// Result, when set, asks for a structured result of its schema.
	Result *ResultSchema `json:"result,omitempty"`

	Executor Executor `json:"executor"`

	// Executors are the session's executor pods (spec.executors), reached
	// over TLS; the workspace container is Executor.
	Executors []RemoteExecutor `json:"executors,omitempty"`

	// Push, when set, delivers the work after the agent completed.
	Push *Push `json:"push,omitempty"`

	// Memory, when set, gives the session the built-in memory, kept in
	// the session store; nil is spec.memory.disabled.
	Memory *Memory `json:"memory,omitempty"`
}

// Memory is where a session's built-in memory is kept in the store: the
// project memory under Namespace and Scope, the user memory under
// Namespace.
type Memory struct {
	// Scope names the project (spec.memory.scope, or the git workspace's
	// URL); empty is the namespace's project memory.
	Scope string `json:"scope,omitempty"`
}

// ResultSchema is the JSON Schema of the structured result an attempt must
// end with (spec.result), resolved by the controller.
type ResultSchema struct {
	// Source names where the schema came from: "spec.result.schema" or
	// "spec.result.schemaFrom (configmap/NAME/KEY)".
	Source string `json:"source"`
	// Schema is the JSON Schema document.
	Schema string `json:"schema"`
}

// Session says which journal session the attempt works on.
type Session struct {
	// ID is the session's id in the store: the AgentSession's UID for a
	// new or forked session, the resumed session's id with ResumeFrom.
	ID string `json:"id"`
	// Attempt counts the runner pods of the AgentSession, from 1. An
	// attempt after the first resumes ID when the store has it (the
	// previous pod was lost), and otherwise starts it as the first would.
	Attempt int32 `json:"attempt"`
	// ResumeFrom is set when the AgentSession continues a session: then it
	// equals ID.
	ResumeFrom string `json:"resumeFrom,omitempty"`
	// ForkFrom is the id of the session copied into the new session ID.
	ForkFrom string `json:"forkFrom,omitempty"`
	// ForkAtSequence is the last sequence number copied; 0 is the latest.
	ForkAtSequence int64 `json:"forkAtSequence,omitempty"`
}

// Model selects the model. The API key is not here: it is in the
// environment variable APIKeyEnv(Provider).
type Model struct {
	Provider        string `json:"provider"`
	Name            string `json:"name"`
	BaseURL         string `json:"baseURL,omitempty"`
	API             string `json:"api,omitempty"`
	ContextWindow   int64  `json:"contextWindow,omitempty"`
	MaxOutputTokens int64  `json:"maxOutputTokens,omitempty"`
}

// Layer kinds a pod mounts, as layer.Kind spells them.
const (
	LayerSpec      = "spec"
	LayerNamespace = "namespace"
	LayerPlatform  = "platform"
)

// Layer is one mounted extension layer.
type Layer struct {
	// Name labels the layer in reports: the spec's layer name, or the
	// ConfigMap's name.
	Name string `json:"name"`
	// Kind is spec, namespace or platform.
	Kind string `json:"kind"`
	// Dir is the mount path, seen by both containers.
	Dir string `json:"dir"`
	// Digest is the content digest ("sha256:<hex>") of a ConfigMap layer
	// at the time the attempt was rendered; empty for volumes.
	Digest string `json:"digest,omitempty"`
	// Source names what holds the layer: "configmap/NAME" ("configmap/MIRROR
	// from configmap/NAMESPACE/NAME" for a platform layer's mirror),
	// "pvc/CLAIM[/SUBPATH]" or "image/REFERENCE[/SUBPATH]".
	Source string `json:"source,omitempty"`
}

// Trust says whose trust pins the runner honours.
type Trust struct {
	// Sources are the layer kinds whose trust.toml files are honoured:
	// Extensions, Namespace, Platform.
	Sources []string `json:"sources,omitempty"`
	// Pins are further trust.toml documents, resolved from ConfigMaps by
	// the controller.
	Pins []TrustPins `json:"pins,omitempty"`
}

// TrustPins is one trust.toml document and where it came from.
type TrustPins struct {
	// Source names the ConfigMap and key, "configmap/NAME/KEY".
	Source string `json:"source"`
	TOML   string `json:"toml"`
}

// Budget bounds the attempt. Zero values are no limit.
type Budget struct {
	// MaxDuration is what is left of the session's wall-time budget when
	// the attempt was rendered, in Go duration syntax ("59m30s").
	MaxDuration Duration `json:"maxDuration,omitempty"`
	MaxTurns    int32    `json:"maxTurns,omitempty"`
	MaxTokens   int64    `json:"maxTokens,omitempty"`
	// MaxCostUSD is the cost budget in US dollars (spec.budget.maxCostUSD).
	MaxCostUSD float64 `json:"maxCostUSD,omitempty"`
}

// Executor says where the workspace container serves the agent's tools.
type Executor struct {
	// Socket is the executor's unix socket.
	Socket string `json:"socket"`
	// Workspace is the workspace root as the executor names it.
	Workspace string `json:"workspace"`
	// WorkingDir is the agent's working directory, relative to Workspace.
	WorkingDir string `json:"workingDir,omitempty"`
}

// DefaultExecutorName is the workspace container's executor's name.
const DefaultExecutorName = "workspace"

// ExecutorPort is the port an executor pod serves the runner on.
const ExecutorPort = 7443

// DefaultExecutorCredential is where the agent container finds its
// credential for the executor pods: its certificate, its key and the
// attempt's CA.
const DefaultExecutorCredential = "/etc/aerie/executors/runner.pem"

// RemoteExecutor is an executor pod of the session.
type RemoteExecutor struct {
	// Name is the executor's name (spec.executors[].name).
	Name string `json:"name"`
	// Address is where it serves: the pod's IP and ExecutorPort.
	Address string `json:"address"`
	// Default makes it where tools run when a call names no executor.
	Default bool `json:"default,omitempty"`
	// Credential is the runner's credential file for the attempt.
	Credential string `json:"credential"`
	// Workspace is the executor's workspace root, where it works.
	Workspace string `json:"workspace"`
}

// Dir returns the agent's working directory: the workspace root joined
// with WorkingDir.
func (e Executor) Dir() string {
	if e.WorkingDir == "" {
		return e.Workspace
	}
	return path.Join(e.Workspace, e.WorkingDir)
}

// Duration is a time.Duration written as Go duration text in the file.
type Duration time.Duration

// MarshalJSON writes d as "1h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON reads Go duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return fmt.Errorf("want a duration in quotes, such as \"30m\", not %s", s)
	}
	v, err := time.ParseDuration(s[1 : len(s)-1])
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// FieldError is a configuration value that is wrong; Field is its path in
// the file ("model.provider", "layers[2].dir").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first field that is missing or wrong, as a
// *FieldError.
func (c *Config) Validate() error {
	errs := slices.Concat(
		c.validateIdentity(), c.validateSession(), c.validateModel(), c.validateHookApproval(),
		c.validateLayers(), c.validateTrust(), c.validateBudget(), c.validateExecutor(), c.validatePush(),
	)
	if len(errs) == 0 {
		return nil
	}
	// The first error names the field; the others follow it, in the order
	// of the fields, so one pass over a broken file shows every mistake.
	return errors.Join(errs...)
}

// validateIdentity checks what the file is and the AgentSession it is for.
func (c *Config) validateIdentity() (errs []error) {
	if c.APIVersion != APIVersion {
		errs = append(errs, fieldErr("apiVersion", "%q: want %q", c.APIVersion, APIVersion))
	}
	if c.Kind != Kind {
		errs = append(errs, fieldErr("kind", "%q: want %q", c.Kind, Kind))
	}
	if c.Namespace == "" {
		errs = append(errs, fieldErr("namespace", "missing: the AgentSession's namespace scopes its sessions"))
	}
	if c.AgentSession == "" {
		errs = append(errs, fieldErr("agentSession", "missing: the AgentSession's name"))
	}
	return errs
}

// validateSession checks the session, how it starts (new, resumed or
// forked), and that a new one has a prompt.
func (c *Config) validateSession() (errs []error) {
	s := c.Session
	if _, err := uuid.Parse(s.ID); err != nil {
		errs = append(errs, fieldErr("session.id", "%q is not a UUID: %v", s.ID, err))
	}
	if s.Attempt < 1 {
		errs = append(errs, fieldErr("session.attempt", "%d: attempts count from 1", s.Attempt))
	}
	if s.ResumeFrom != "" && s.ForkFrom != "" {
		errs = append(errs, fieldErr("session.forkFrom",
			"set together with session.resumeFrom: a session is resumed or forked, not both"))
	}
	if s.ResumeFrom != "" && s.ResumeFrom != s.ID {
		errs = append(errs, fieldErr("session.resumeFrom",
			"%q differs from session.id %q: a resumed session keeps its id", s.ResumeFrom, s.ID))
	}
	if s.ForkFrom != "" {
		if _, err := uuid.Parse(s.ForkFrom); err != nil {
			errs = append(errs, fieldErr("session.forkFrom", "%q is not a UUID: %v", s.ForkFrom, err))
		}
	}
	if s.ForkAtSequence < 0 || (s.ForkAtSequence > 0 && s.ForkFrom == "") {
		errs = append(errs, fieldErr("session.forkAtSequence",
			"%d: want a positive sequence number, with session.forkFrom", s.ForkAtSequence))
	}
	if strings.TrimSpace(c.Prompt) == "" && s.ResumeFrom == "" && s.ForkFrom == "" {
		errs = append(errs, fieldErr("prompt", "missing: a new session needs a task"))
	}
	return errs
}

// validateModel checks the provider and the model.
func (c *Config) validateModel() (errs []error) {
	m := c.Model
	switch m.Provider {
	case ProviderAnthropic, ProviderOpenAI, ProviderOpenAICompatible, ProviderScripted:
	default:
		errs = append(errs, fieldErr("model.provider",
			"%q: want one of anthropic, openai, openai-compatible, scripted", m.Provider))
	}
	if m.Name == "" {
		errs = append(errs, fieldErr("model.name", "missing"))
	}
	if m.Provider == ProviderOpenAICompatible && m.BaseURL == "" {
		errs = append(errs, fieldErr("model.baseURL", "missing: provider openai-compatible needs the server's URL"))
	}
	if m.ContextWindow < 0 {
		errs = append(errs, fieldErr("model.contextWindow", "%d: want a positive number of tokens", m.ContextWindow))
	}
	if m.MaxOutputTokens < 0 {
		errs = append(errs, fieldErr("model.maxOutputTokens", "%d: want a positive number of tokens", m.MaxOutputTokens))
	}
	return errs
}

// Approval is a decision on a tool call a session paused on.
type Approval struct {
	// CallID is the pending call's id.
	CallID string `json:"callID"`
	// Allowed runs the call; otherwise the model is told it was denied,
	// with Reason.
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	// By says where the decision came from (spec.approvals,
	// approvalTimeout).
	By string `json:"by,omitempty"`
}

func (c *Config) validateHookApproval() []error {
	var errs []error
	switch c.HookApproval {
	case "", HookApprovalDeny, HookApprovalAllow, HookApprovalAsk:
	default:
		errs = append(errs, fieldErr("hookApproval", "%q: want deny, allow or ask", c.HookApproval))
	}
	for i, a := range c.Approvals {
		if a.CallID == "" {
			errs = append(errs, fieldErr(fmt.Sprintf("approvals[%d].callID", i), "missing"))
		}
	}
	return errs
}

// validateLayers checks each layer and that no two share a directory.
func (c *Config) validateLayers() (errs []error) {
	dirs := map[string]int{}
	for i, l := range c.Layers {
		f := fmt.Sprintf("layers[%d]", i)
		switch {
		case l.Name == "":
			errs = append(errs, fieldErr(f+".name", "missing"))
		case l.Kind != LayerSpec && l.Kind != LayerNamespace && l.Kind != LayerPlatform:
			errs = append(errs, fieldErr(f+".kind", "%q: want spec, namespace or platform", l.Kind))
		case !path.IsAbs(l.Dir) || path.Clean(l.Dir) != l.Dir:
			errs = append(errs, fieldErr(f+".dir", "%q: want a clean absolute path", l.Dir))
		case l.Digest != "" && !validDigest(l.Digest):
			errs = append(errs, fieldErr(f+".digest", "%q: want sha256:<64 hex digits>", l.Digest))
		}
		if j, ok := dirs[l.Dir]; ok && l.Dir != "" {
			errs = append(errs, fieldErr(f+".dir", "%q is also layers[%d].dir", l.Dir, j))
		}
		dirs[l.Dir] = i
	}
	return errs
}

func (c *Config) validateTrust() (errs []error) {
	for i, s := range c.Trust.Sources {
		if s != "Extensions" && s != "Namespace" && s != "Platform" {
			errs = append(errs, fieldErr(fmt.Sprintf("trust.sources[%d]", i), "%q: want Extensions, Namespace or Platform", s))
		}
	}
	for i, p := range c.Trust.Pins {
		if p.Source == "" {
			errs = append(errs, fieldErr(fmt.Sprintf("trust.pins[%d].source", i), "missing"))
		}
	}
	return errs
}

func (c *Config) validateBudget() (errs []error) {
	b := c.Budget
	if b.MaxDuration < 0 {
		errs = append(errs, fieldErr("budget.maxDuration", "%s: want a positive duration", time.Duration(b.MaxDuration)))
	}
	if b.MaxTurns < 0 {
		errs = append(errs, fieldErr("budget.maxTurns", "%d: want a positive number", b.MaxTurns))
	}
	if b.MaxTokens < 0 {
		errs = append(errs, fieldErr("budget.maxTokens", "%d: want a positive number", b.MaxTokens))
	}
	if !(b.MaxCostUSD >= 0) || math.IsInf(b.MaxCostUSD, 0) {
		errs = append(errs, fieldErr("budget.maxCostUSD", "%v: want a positive number of US dollars", b.MaxCostUSD))
	}
	return errs
}

func (c *Config) validateExecutor() (errs []error) {
	e := c.Executor
	if !path.IsAbs(e.Socket) {
		errs = append(errs, fieldErr("executor.socket", "%q: want an absolute path", e.Socket))
	}
	if !path.IsAbs(e.Workspace) {
		errs = append(errs, fieldErr("executor.workspace", "%q: want an absolute path", e.Workspace))
	}
	if w := e.WorkingDir; w != "" && (path.IsAbs(w) || !local(w)) {
		errs = append(errs, fieldErr("executor.workingDir", "%q: want a path relative to the workspace, without '..'", w))
	}
	return append(errs, c.validateExecutors()...)
}

func (c *Config) validateExecutors() (errs []error) {
	seen := map[string]bool{DefaultExecutorName: true, "local": true}
	defaults := 0
	for i, e := range c.Executors {
		field := func(f string) string { return fmt.Sprintf("executors[%d].%s", i, f) }
		switch {
		case !dnsLabel(e.Name):
			errs = append(errs, fieldErr(field("name"), "%q: want a DNS label (lower-case letters, digits, '-')", e.Name))
		case seen[e.Name]:
			errs = append(errs, fieldErr(field("name"),
				"%q: another executor has this name (workspace and local are the workspace container's)", e.Name))
		}
		seen[e.Name] = true
		if _, port, err := net.SplitHostPort(e.Address); err != nil || port == "" {
			errs = append(errs, fieldErr(field("address"), "%q: want HOST:PORT", e.Address))
		}
		if !path.IsAbs(e.Credential) {
			errs = append(errs, fieldErr(field("credential"), "%q: want an absolute path", e.Credential))
		}
		if !path.IsAbs(e.Workspace) {
			errs = append(errs, fieldErr(field("workspace"), "%q: want an absolute path", e.Workspace))
		}
		if e.Default {
			defaults++
		}
	}
	if defaults > 1 {
		errs = append(errs, fieldErr("executors", "%d executors are the default: want at most one", defaults))
	}
	return errs
}

// dnsLabel reports whether s is a lower-case DNS label of at most 63
// characters.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

func local(p string) bool {
	c := path.Clean(p)
	return c != ".." && !strings.HasPrefix(c, "../")
}

func validDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, r := range hex {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// Marshal validates c and encodes it as YAML.
func (c *Config) Marshal() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("encode runner config: %w", err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode runner config: %w", err)
	}
	return b, nil
}

// maxConfigBytes bounds a configuration file: a ConfigMap holds at most
// 1 MiB.
const maxConfigBytes = 1 << 20

// Parse decodes and validates a configuration. Unknown fields are errors,
// so a misspelt field is not silently ignored.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%d bytes: a runner config is at most %d", len(data), maxConfigBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty: want a runner config with apiVersion " + APIVersion)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Load reads and parses the configuration file at configPath. Errors name
// the file and the field at fault.
func Load(configPath string) (*Config, error) {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return nil, fmt.Errorf("read runner config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("runner config %s: %w", configPath, err)
	}
	return c, nil
}

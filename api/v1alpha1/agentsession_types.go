package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AgentSessionSpec describes one agent session: the task, the model, the extensions layered
// around the agent, the workspace it works in and the limits it runs under.
//
// The spec is immutable once created, except for cancel, in the way a Job's pod template is:
// to run again with other settings, create a new AgentSession (resumeFrom or forkFrom carry
// the conversation over).
//
// +kubebuilder:validation:XValidation:rule="has(self.prompt) != has(self.promptFrom)",message="exactly one of prompt or promptFrom must be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.resumeFrom) && has(self.forkFrom))",message="resumeFrom and forkFrom are mutually exclusive: resume appends to a session, fork copies it into a new one"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.cancel) && oldSelf.cancel) || (has(self.cancel) && self.cancel)",message="cancel cannot be unset once true"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approvals) || has(self.approvals)",message="approvals are append-only: a decision cannot be removed"
// +kubebuilder:validation:XValidation:rule="has(self.prompt) == has(oldSelf.prompt) && has(self.promptFrom) == has(oldSelf.promptFrom) && has(self.toolset) == has(oldSelf.toolset) && has(self.persona) == has(oldSelf.persona) && has(self.hookApproval) == has(oldSelf.hookApproval) && has(self.extensions) == has(oldSelf.extensions) && has(self.trust) == has(oldSelf.trust) && has(self.workspace) == has(oldSelf.workspace) && has(self.resumeFrom) == has(oldSelf.resumeFrom) && has(self.forkFrom) == has(oldSelf.forkFrom) && has(self.budget) == has(oldSelf.budget) && has(self.runner) == has(oldSelf.runner) && has(self.retry) == has(oldSelf.retry) && has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && has(self.approvalTimeout) == has(oldSelf.approvalTimeout) && has(self.result) == has(oldSelf.result) && has(self.secrets) == has(oldSelf.secrets) && has(self.memory) == has(oldSelf.memory) && has(self.executors) == has(oldSelf.executors)",message="spec is immutable except for cancel and approvals; create a new AgentSession (resumeFrom or forkFrom) to change it"
type AgentSessionSpec struct {
	// prompt is the task given to the agent as the first user message.
	// Exactly one of prompt and promptFrom must be set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="prompt is immutable"
	Prompt string `json:"prompt,omitempty"`

	// promptFrom reads the prompt from a key of a ConfigMap or Secret in the session's
	// namespace. The controller resolves it when the session starts, so a later change to
	// the source does not change a running session.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="promptFrom is immutable"
	PromptFrom *PromptSource `json:"promptFrom,omitempty"`

	// model selects the model provider and model the agent talks to.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="model is immutable"
	Model ModelSpec `json:"model"`

	// secrets are the credentials the session's extensions need, each an environment
	// variable of the runner's agent container filled from a key of a Secret in the
	// session's namespace, by reference as the model's API key is (the controller checks that
	// the key exists and never copies its value). They resolve ${NAME} in the MCP servers'
	// headers, url and env that the extension layers declare (a plugin's .mcp.json,
	// mcp_servers/*.yaml); in a pod, only the names listed here resolve.
	// The values are given to the agent container only: never to the workspace container
	// where the tools run, nor to the init containers, and they appear in no layer, log,
	// event or status.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="secrets are immutable"
	Secrets []SecretEnv `json:"secrets,omitempty"`

	// toolset names a toolset from the layers' toolsets.toml files; only its tools are
	// offered to the model. Empty means every available tool.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="toolset is immutable"
	Toolset string `json:"toolset,omitempty"`

	// persona names the persona whose base system prompt (and default toolset) the agent
	// uses: a personas/<name>.toml file (prompt, optional toolset) in the extension layers,
	// the nearest valid one winning. Empty means the default persona.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="persona is immutable"
	Persona string `json:"persona,omitempty"`

	// hookApproval is the policy for tool calls a lifecycle hook asks a person to approve
	// (permissionDecision "ask"): deny, the default, refuses such a call with the hook's
	// reason; allow approves it in advance; ask pauses the session (phase
	// AwaitingApproval, condition AwaitingApproval=True naming the call) until a decision
	// is added to approvals or approvalTimeout passes. Either way the decision is recorded
	// in the session.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="hookApproval is immutable"
	HookApproval HookApproval `json:"hookApproval,omitempty"`

	// approvals are the decisions on the tool calls the session paused on (hookApproval
	// ask), one per call id. The list is append-only: a decision cannot be changed or
	// removed. The controller starts the next attempt, which runs or refuses the call, once
	// the pending call has a decision.
	// +optional
	// +listType=map
	// +listMapKey=callID
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="size(self) >= size(oldSelf) && oldSelf.all(a, a in self)",message="approvals are append-only: a decision cannot be changed or removed"
	Approvals []ApprovalDecision `json:"approvals,omitempty"`

	// approvalTimeout is how long a paused call waits for a decision in approvals; then it
	// is denied ("approval timed out") and the session resumes.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('720h')",message="approvalTimeout must be between 1s and 720h"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="approvalTimeout is immutable"
	ApprovalTimeout *metav1.Duration `json:"approvalTimeout,omitempty"`

	// extensions are extension layers mounted read-only into the runner, nearest first: an
	// artifact in an earlier layer shadows the same artifact in a later one. They come after
	// the project's own .aerie/ directories and before the namespace and platform layers.
	// Each layer directory may hold any extension artifact (SYSTEM.md, tools/*.toml,
	// hooks.toml, hooks/*.yaml, skills/, plugins/, mcp_servers/*.yaml, toolsets.toml, ...).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="extensions are immutable"
	Extensions []ExtensionLayer `json:"extensions,omitempty"`

	// trust says where trust pins for project executables (custom tools and hooks found in
	// the workspace) come from. Pins are never read from the workspace itself.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="trust is immutable"
	Trust *TrustSpec `json:"trust,omitempty"`

	// workspace is the directory the agent works in, mounted at /workspace in the runner
	// pod. Without it, the session gets an empty directory.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workspace is immutable"
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`

	// resumeFrom continues an earlier session, appending to its journal: either a session
	// id (a UUID, as shown in status.sessionID) or the name of an AgentSession in this
	// namespace. The stored provider and model are restored.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="resumeFrom is immutable"
	ResumeFrom string `json:"resumeFrom,omitempty"`

	// forkFrom starts a new session from a copy of another session's journal, through a
	// sequence number. The source session is unchanged.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="forkFrom is immutable"
	ForkFrom *ForkSource `json:"forkFrom,omitempty"`

	// budget bounds the session. Reaching any limit stops the agent with the outcome
	// BudgetExceeded (or TimedOut for maxDuration).
	// +optional
	// +kubebuilder:default={}
	Budget *Budget `json:"budget,omitempty"`

	// cancel, when set to true, stops the session: the runner pod is deleted with its grace
	// period, every tool process is torn down, the journal is drained and the outcome is
	// recorded as Cancelled. It cannot be set back to false.
	// +optional
	// +kubebuilder:default=false
	Cancel bool `json:"cancel,omitempty"`

	// runner customises the runner pod.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runner is immutable"
	Runner *RunnerSpec `json:"runner,omitempty"`

	// retry says how often a session is restarted (resuming the same session) when its pod
	// is lost for reasons that are not the agent's: eviction, node loss, OOM kill, deletion
	// by someone else. A failure of the agent itself is never retried.
	// +optional
	// +kubebuilder:default={}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="retry is immutable"
	Retry *RetryPolicy `json:"retry,omitempty"`

	// ttlSecondsAfterFinished deletes the AgentSession (and its pod) this many seconds after
	// it finished. Unset keeps it until deleted; 0 deletes it as soon as it finishes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ttlSecondsAfterFinished is immutable"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// result asks the agent for a structured result: the model is given a submit_result tool
	// whose input schema is the result's JSON Schema, and the session ends when it submits a
	// value the schema accepts (an invalid one goes back to the model with the validation
	// errors, at most 3 times). The value is kept in the session store and, when it fits, in
	// status.result.structured; a session that gets none ends Failed with the outcome
	// ResultInvalid (exit code 6).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="result is immutable"
	Result *ResultSpec `json:"result,omitempty"`

	// memory configures the built-in memory: the memory tool, with which the model saves what
	// later sessions should know about the project (MEMORY.md) and about the user (USER.md),
	// and the memory given to each session in its system prompt as it was when the session
	// started. In a pod, memory is kept in the session store, per namespace and project, so
	// the next session on the same project sees it; the user memory is the namespace's.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="memory is immutable"
	Memory *MemorySpec `json:"memory,omitempty"`

	// executors are executors of their own besides the runner pod's workspace container
	// (named workspace, the default unless an executor here sets default): each is a pod
	// created with the runner pod, from its own image, on the nodes and runtime it asks
	// for, with its own workspace. The model picks where bash, process and the file tools
	// run with their executor argument; custom tools and MCP servers name theirs. The runner
	// reaches each over TLS, both sides authenticated with credentials made for the attempt.
	// Executor pods hold no secret and no service-account token, and end with the attempt.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.filter(e, has(e.default) && e.default).size() <= 1",message="at most one executor may be the default"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="executors are immutable"
	Executors []ExecutorSpec `json:"executors,omitempty"`
}

// ExecutorSpec is an executor in a pod of its own.
// +kubebuilder:validation:XValidation:rule="!has(self.workspace) || !has(self.workspace.workingDir)",message="an executor works in its workspace root: leave workingDir out (a command can cd)"
// +kubebuilder:validation:XValidation:rule="!has(self.workspace) || !has(self.workspace.git) || !has(self.workspace.git.push)",message="an executor's workspace cannot push: push is spec.workspace.git.push, from the runner pod's workspace"
type ExecutorSpec struct {
	// name of the executor: what the model, custom tools (executor = "name") and MCP
	// servers (executors: [name]) call it. workspace is the runner pod's own.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'workspace' && self != 'local' && self != 'runner'",message="workspace and local name the runner pod's own executor, runner the runner; choose another name"
	Name string `json:"name"`

	// image of the executor pod's container: the toolchain the tools routed here run with.
	// It needs no aerie binary: the controller copies one in from the runner image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// default makes this executor, instead of workspace, where tools run when the call names
	// none. At most one executor is the default.
	// +optional
	Default bool `json:"default,omitempty"`

	// resources of the executor's container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains the executor pod to nodes with these labels (a GPU node, say).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the executor pod schedule onto tainted nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// runtimeClassName selects a RuntimeClass (gVisor, Kata) for the executor pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// env sets environment variables of the executor, where its tools run. References to
	// Secrets are refused: anything tools can read, the model can read.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))",message="env must not reference Secrets: tools would see them"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// workspace is the executor's own workspace, mounted at /workspace in its pod: an empty
	// directory (the default), a directory of a PVC (the runner pod's PVC too, when its access
	// mode lets both pods mount it), or a git clone (without push). The executor works in its
	// root: a command can cd.
	// +optional
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`
}

// MemorySpec configures the built-in memory of a session.
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && self.disabled && has(self.scope))",message="scope has no use when memory is disabled"
type MemorySpec struct {
	// scope names the project whose memory the session reads and writes. Unset, it is the
	// URL of spec.workspace.git (without a trailing .git or /), so sessions on the same
	// repository share it; with no git workspace either, the session uses the namespace's
	// project memory, shared by every session that names no project.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._/-]*$`
	Scope string `json:"scope,omitempty"`

	// disabled offers no memory tool and gives no memory in the system prompt.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// ResultSpec says what structured result a session must end with.
// +kubebuilder:validation:XValidation:rule="has(self.schema) != has(self.schemaFrom)",message="exactly one of schema or schemaFrom must be set"
type ResultSpec struct {
	// schema is the result's JSON Schema (draft 2020-12 unless its $schema names another), as
	// an object. A schema the runner cannot compile fails the session with the reason.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Schema *runtime.RawExtension `json:"schema,omitempty"`

	// schemaFrom reads the JSON Schema from a key of a ConfigMap in the session's namespace,
	// when the session starts.
	// +optional
	SchemaFrom *ResultSchemaSource `json:"schemaFrom,omitempty"`
}

// ResultSchemaSource selects where a result's JSON Schema is read from.
type ResultSchemaSource struct {
	// configMapKeyRef reads the schema from a ConfigMap key.
	// +required
	ConfigMapKeyRef KeyReference `json:"configMapKeyRef"`
}

// PromptSource selects the key of a ConfigMap or Secret that holds the prompt.
// +kubebuilder:validation:XValidation:rule="has(self.configMapKeyRef) != has(self.secretKeyRef)",message="exactly one of configMapKeyRef or secretKeyRef must be set"
type PromptSource struct {
	// configMapKeyRef reads the prompt from a ConfigMap key.
	// +optional
	ConfigMapKeyRef *KeyReference `json:"configMapKeyRef,omitempty"`

	// secretKeyRef reads the prompt from a Secret key, for prompts that must not be visible
	// to everyone who can read AgentSessions.
	// +optional
	SecretKeyRef *KeyReference `json:"secretKeyRef,omitempty"`
}

// KeyReference names one key of a ConfigMap or Secret in the session's namespace.
type KeyReference struct {
	// name of the ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// key within the ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// SecretEnv is one environment variable of the agent container, filled from a Secret key.
type SecretEnv struct {
	// name is the variable's name, as ${name} spells it in an extension. It is a variable
	// name (letters, digits and underscores, not starting with a digit) and none of those
	// the agent container already has: HOME, TMPDIR, PATH, the providers' API keys
	// (ANTHROPIC_API_KEY, OPENAI_API_KEY), aerie's own (AERIE_*) and the dynamic loader's
	// (LD_*).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="name must be an environment variable name: letters, digits and underscores, not starting with a digit"
	// +kubebuilder:validation:XValidation:rule="!(self in ['HOME', 'TMPDIR', 'PATH', 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY']) && !self.startsWith('AERIE_') && !self.startsWith('LD_')",message="name is reserved: HOME, TMPDIR, PATH, ANTHROPIC_API_KEY, OPENAI_API_KEY and AERIE_* are the agent container's own, and LD_* would load code into it; give the variable another name"
	Name string `json:"name"`

	// secretKeyRef names the Secret key that holds the value.
	// +required
	SecretKeyRef KeyReference `json:"secretKeyRef"`
}

// HookApproval is the policy for tool calls a lifecycle hook asks a person to approve.
// +kubebuilder:validation:Enum=deny;allow;ask
type HookApproval string

const (
	// HookApprovalDeny refuses such a call with the hook's reason.
	HookApprovalDeny HookApproval = "deny"
	// HookApprovalAllow approves such a call in advance.
	HookApprovalAllow HookApproval = "allow"
	// HookApprovalAsk pauses the session until spec.approvals decides the call.
	HookApprovalAsk HookApproval = "ask"
)

// Decision is a person's answer to a paused tool call.
// +kubebuilder:validation:Enum=Allow;Deny
type Decision string

const (
	// DecisionAllow runs the call.
	DecisionAllow Decision = "Allow"
	// DecisionDeny refuses the call; the model is told so, with the reason.
	DecisionDeny Decision = "Deny"
)

// ApprovalDecision decides one tool call the session paused on.
type ApprovalDecision struct {
	// callID is the paused call's id, as in the AwaitingApproval condition's message.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	CallID string `json:"callID"`

	// decision is Allow or Deny.
	// +required
	Decision Decision `json:"decision"`

	// reason is told to the model with a denial and recorded in the session.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// ModelProvider names a model API.
// +kubebuilder:validation:Enum=anthropic;openai;openai-compatible;scripted
type ModelProvider string

const (
	// ProviderAnthropic is the Anthropic Messages API.
	ProviderAnthropic ModelProvider = "anthropic"
	// ProviderOpenAI is the OpenAI API (Chat Completions and Responses).
	ProviderOpenAI ModelProvider = "openai"
	// ProviderOpenAICompatible is an endpoint speaking the OpenAI Chat Completions API at
	// baseURL (vLLM, Ollama, LiteLLM, ...).
	ProviderOpenAICompatible ModelProvider = "openai-compatible"
	// ProviderScripted replays a file of model turns; for demos and CI dry runs.
	ProviderScripted ModelProvider = "scripted"
)

// ModelSpec selects the model.
// +kubebuilder:validation:XValidation:rule="self.provider != 'openai-compatible' || has(self.baseURL)",message="baseURL is required for provider openai-compatible"
// +kubebuilder:validation:XValidation:rule="!(self.provider in ['anthropic', 'openai']) || has(self.apiKeySecretRef)",message="apiKeySecretRef is required for providers anthropic and openai"
// +kubebuilder:validation:XValidation:rule="self.provider != 'scripted' || !has(self.apiKeySecretRef)",message="the scripted provider takes no apiKeySecretRef"
type ModelSpec struct {
	// provider is the model API: anthropic, openai, openai-compatible or scripted.
	// +required
	Provider ModelProvider `json:"provider"`

	// name is the model name the provider knows, for example "claude-sonnet-4-5" or
	// "gpt-5". For the scripted provider it names the script: scripted/<name>.yaml (or
	// .json) in the extension layers.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$`
	Name string `json:"name"`

	// baseURL overrides the provider's API endpoint; required for openai-compatible. It
	// carries no credentials (user:password@): anyone who can read the session could read them.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="baseURL must be an http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@')",message="baseURL must not carry credentials; put the API key in a Secret and name it in apiKeySecretRef"
	BaseURL string `json:"baseURL,omitempty"`

	// apiKeySecretRef names the Secret key that holds the API key. It is given only to the
	// runner's agent container, never to the workspace container where tools run.
	// +optional
	APIKeySecretRef *KeyReference `json:"apiKeySecretRef,omitempty"`

	// contextWindow is the model's context window in tokens. It overrides aerie's table of
	// known models for this session. Automatic compaction summarizes the start of the
	// conversation before a request would fill 85 % of it; without a window from either, only
	// a request the model refuses as too large is compacted, then sent again.
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=100000000
	ContextWindow *int64 `json:"contextWindow,omitempty"`

	// maxOutputTokens caps the tokens the model may produce in one response.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	MaxOutputTokens *int64 `json:"maxOutputTokens,omitempty"`
}

// ExtensionLayer is one directory of extension artifacts. Exactly one source must be set.
// +kubebuilder:validation:XValidation:rule="(has(self.configMap) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) + (has(self.image) ? 1 : 0) == 1",message="exactly one of configMap, persistentVolumeClaim or image must be set"
type ExtensionLayer struct {
	// name labels the layer in the extensions report; defaults to the source's name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// configMap is a ConfigMap in the session's namespace whose keys are the layer's files
	// (see `aerie layer pack` for the encoding of directory trees and executable files).
	// +optional
	ConfigMap *ConfigMapLayer `json:"configMap,omitempty"`

	// persistentVolumeClaim mounts a directory of a PVC in the session's namespace.
	// +optional
	PersistentVolumeClaim *PVCLayer `json:"persistentVolumeClaim,omitempty"`

	// image mounts the content of an OCI image (or artifact) as the layer, read-only.
	// +optional
	Image *ImageLayer `json:"image,omitempty"`
}

// ConfigMapLayer is a layer held in a ConfigMap.
type ConfigMapLayer struct {
	// name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// PVCLayer is a layer held on a PersistentVolumeClaim.
type PVCLayer struct {
	// claimName is the name of the PersistentVolumeClaim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ClaimName string `json:"claimName"`

	// subPath is the directory within the volume that holds the layer; empty is the root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="subPath must be a relative path without '..' segments"
	SubPath string `json:"subPath,omitempty"`
}

// ImageLayer is a layer held in an OCI image or artifact, mounted as an image volume.
type ImageLayer struct {
	// reference is the image reference, for example registry.example.com/skills:v1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reference string `json:"reference"`

	// pullPolicy is the image pull policy for the layer.
	// +optional
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`

	// subPath is the directory within the image that holds the layer; empty is the root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="subPath must be a relative path without '..' segments"
	SubPath string `json:"subPath,omitempty"`
}

// TrustSource names a kind of layer the session's submitter controls.
// +kubebuilder:validation:Enum=Extensions;Namespace;Platform
type TrustSource string

const (
	// TrustFromExtensions honours trust.toml files in the layers of spec.extensions.
	TrustFromExtensions TrustSource = "Extensions"
	// TrustFromNamespace honours trust.toml files in the namespace layers.
	TrustFromNamespace TrustSource = "Namespace"
	// TrustFromPlatform honours trust.toml files in the platform layers.
	TrustFromPlatform TrustSource = "Platform"
)

// TrustSpec says where trust pins come from. A project executable (a custom tool or hook
// found in the workspace's .aerie/ directories) runs only when a pin from one of these
// sources matches its hash; pins found in the workspace are never honoured, because the
// workspace is what the pins protect against.
type TrustSpec struct {
	// sources lists the layer kinds whose trust.toml files are honoured.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:default={Extensions,Namespace,Platform}
	Sources []TrustSource `json:"sources,omitempty"`

	// pinsFrom lists further trust.toml files held in ConfigMap keys of the session's
	// namespace.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	PinsFrom []KeyReference `json:"pinsFrom,omitempty"`
}

// WorkspaceSpec describes the agent's working directory. At most one of emptyDir,
// persistentVolumeClaim and git may be set; none means an empty directory.
// +kubebuilder:validation:XValidation:rule="(has(self.emptyDir) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) + (has(self.git) ? 1 : 0) <= 1",message="at most one of emptyDir, persistentVolumeClaim or git may be set"
type WorkspaceSpec struct {
	// emptyDir gives the session a fresh, empty workspace.
	// +optional
	EmptyDir *EmptyDirWorkspace `json:"emptyDir,omitempty"`

	// persistentVolumeClaim works in a directory of a PVC, which outlives the session.
	// +optional
	PersistentVolumeClaim *PVCWorkspace `json:"persistentVolumeClaim,omitempty"`

	// git clones a repository into a fresh workspace before the agent starts.
	// +optional
	Git *GitWorkspace `json:"git,omitempty"`

	// workingDir is the agent's working directory, relative to the workspace root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="workingDir must be a relative path without '..' segments"
	WorkingDir string `json:"workingDir,omitempty"`
}

// EmptyDirWorkspace is a workspace that lives and dies with the runner pod.
type EmptyDirWorkspace struct {
	// sizeLimit bounds the workspace's size.
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// PVCWorkspace is a workspace on a PersistentVolumeClaim.
type PVCWorkspace struct {
	// claimName is the name of the PersistentVolumeClaim in the session's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ClaimName string `json:"claimName"`

	// subPath is the directory within the volume used as the workspace root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="subPath must be a relative path without '..' segments"
	SubPath string `json:"subPath,omitempty"`
}

// GitWorkspace clones a git repository into the workspace.
// +kubebuilder:validation:XValidation:rule="!has(self.push) || self.url.matches('^https?://')",message="push needs an https (or http) url: the work and its credentials are pushed over HTTP only"
type GitWorkspace struct {
	// url of the repository (https://, http://, ssh:// or scp-like git@host:path).
	// Credentials never go in the URL: use secretRef.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh|git)://[^/@:]+') || self.matches('^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:')",message="url must be an https, http, ssh or git URL, or scp-like user@host:path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://[^/]*@')",message="url must not carry credentials; use secretRef"
	URL string `json:"url"`

	// ref is the branch, tag or commit to check out; empty is the remote's default branch.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._/-]*$`
	Ref string `json:"ref,omitempty"`

	// depth makes a shallow clone of this many commits; 0 or unset clones full history.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Depth int32 `json:"depth,omitempty"`

	// secretRef names a Secret in the session's namespace with the clone credentials:
	// keys username and password (a token) for HTTP, or ssh-privatekey (and optionally
	// known_hosts) for SSH. Only the clone step sees it; the agent and its tools never do.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`

	// push commits the workspace's changes when the agent completes its task and pushes
	// them to a branch of url.
	// +optional
	Push *GitPush `json:"push,omitempty"`
}

// GitPush delivers the work: after the agent ends with outcome Completed, a container that
// holds no model key commits the workspace's files onto the cloned commit and pushes the
// commit to branch. Hooks and git configuration in the workspace are never used.
type GitPush struct {
	// branch is the branch pushed to; default aerie/<session name>. An existing branch
	// must be an ancestor of the new commit (the push is never forced).
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._/-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('//') && !self.endsWith('/') && !self.endsWith('.') && !self.endsWith('.lock')",message="branch must be a valid git branch name: no '..' or '//', not ending in '/', '.' or '.lock'"
	Branch string `json:"branch,omitempty"`

	// commitMessage is the commit's message; default names the session.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CommitMessage string `json:"commitMessage,omitempty"`

	// author of the commit (also its committer); default aerie <aerie@localhost>.
	// +optional
	Author *GitAuthor `json:"author,omitempty"`

	// secretRef names a Secret in the session's namespace with the push credentials, keys
	// username and password (a token); unset uses workspace.git.secretRef. Only the push
	// container sees it: neither the agent, which holds the model key, nor its tools.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// GitAuthor is a commit's author.
type GitAuthor struct {
	// name of the author.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[<>\\n]')",message="author name must not contain '<', '>' or a newline"
	Name string `json:"name"`
	// email of the author.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^<>\s@]+@[^<>\s@]+$`
	Email string `json:"email"`
}

// ForkSource identifies the session and point to fork from.
type ForkSource struct {
	// session is a session id (UUID) or the name of an AgentSession in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Session string `json:"session"`

	// atSequence is the last journal sequence number copied into the fork; unset copies
	// through the latest. It must not fall inside an open tool call.
	// +optional
	// +kubebuilder:validation:Minimum=1
	AtSequence *int64 `json:"atSequence,omitempty"`
}

// Budget bounds a session. Unset limits do not apply.
//
// Its immutability is checked field by field because a duration has many spellings ("1h",
// "60m", "1h0m0s"): a client that re-serializes the spec must not trip the rule.
// +kubebuilder:validation:XValidation:rule="has(self.maxDuration) == has(oldSelf.maxDuration) && has(self.maxTurns) == has(oldSelf.maxTurns) && has(self.maxTokens) == has(oldSelf.maxTokens) && has(self.maxCostUSD) == has(oldSelf.maxCostUSD)",message="budget is immutable"
type Budget struct {
	// maxDuration bounds the wall time of the session (all attempts together); it also sets
	// the runner pod's activeDeadlineSeconds.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('168h')",message="maxDuration must be between 10s and 168h"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="budget is immutable"
	MaxDuration *metav1.Duration `json:"maxDuration,omitempty"`

	// maxTurns bounds the number of model turns of the session, all attempts together (like
	// maxTokens, it counts the session's stored usage, so a session resumed with resumeFrom
	// brings the turns it has already made).
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="budget is immutable"
	MaxTurns *int32 `json:"maxTurns,omitempty"`

	// maxTokens bounds the input plus output tokens of all model calls of the session, all
	// attempts together.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="budget is immutable"
	MaxTokens *int64 `json:"maxTokens,omitempty"`

	// maxCostUSD bounds what the model calls of the session and its subagents cost, in US
	// dollars, as a decimal string with at most 4 decimals ("2.50"), from the model's price
	// (bundled, or [prices."model"] in a layer's config.toml). A model without a price is a
	// configuration error when it is set.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]{1,4})?$')",message="maxCostUSD must be a decimal number of US dollars with at most 4 decimals, such as 2.50"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+([.][0-9]{1,4})?$') || double(self) > 0.0",message="maxCostUSD must be more than 0"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="budget is immutable"
	MaxCostUSD *string `json:"maxCostUSD,omitempty"`
}

// RunnerSpec customises the runner pod.
type RunnerSpec struct {
	// image overrides the runner image configured in the controller.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// resources for the workspace container, where the agent's tools run.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// serviceAccountName runs the pod as this ServiceAccount (for image pull secrets and
	// workload identity). Its token is not mounted.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// runtimeClassName selects a RuntimeClass (for example gVisor or Kata) for stronger
	// isolation of the agent's tools.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// nodeSelector constrains the pod to nodes with these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the pod schedule onto tainted nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// env sets environment variables for the workspace container, where tools, hooks and
	// MCP servers run. References to Secrets are refused: anything tools can read, the model
	// can read.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))",message="env must not reference Secrets: tools would see them"
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// RetryPolicy bounds restarts after pod loss.
type RetryPolicy struct {
	// maxAttempts is the total number of attempts, the first included.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
}

// AgentSessionPhase is a high-level summary of where a session is in its lifecycle.
// +kubebuilder:validation:Enum=Pending;Running;AwaitingApproval;Succeeded;Failed;Cancelled
type AgentSessionPhase string

const (
	// PhasePending: accepted, runner pod not running yet.
	PhasePending AgentSessionPhase = "Pending"
	// PhaseRunning: the runner pod is running the agent.
	PhaseRunning AgentSessionPhase = "Running"
	// PhaseAwaitingApproval: the session paused on a tool call a hook asks a person about
	// (hookApproval ask); no pod runs until spec.approvals decides it or approvalTimeout
	// denies it.
	PhaseAwaitingApproval AgentSessionPhase = "AwaitingApproval"
	// PhaseSucceeded: the agent finished its task.
	PhaseSucceeded AgentSessionPhase = "Succeeded"
	// PhaseFailed: the session ended without finishing (agent failure, budget, retries
	// exhausted, invalid configuration).
	PhaseFailed AgentSessionPhase = "Failed"
	// PhaseCancelled: spec.cancel stopped the session.
	PhaseCancelled AgentSessionPhase = "Cancelled"
)

// Finished reports whether the phase is terminal.
func (p AgentSessionPhase) Finished() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseCancelled
}

// Outcome is how the agent run ended, as the runner reports it.
// +kubebuilder:validation:Enum=Completed;Failed;Cancelled;BudgetExceeded;TimedOut;Error;ResultInvalid;PushFailed
type Outcome string

const (
	// OutcomeCompleted: the model ended its turn with the task done.
	OutcomeCompleted Outcome = "Completed"
	// OutcomeFailed: the agent could not finish (a required hook or server failed, the
	// model refused, a Stop hook blocked to the limit, ...).
	OutcomeFailed Outcome = "Failed"
	// OutcomeCancelled: the session was cancelled.
	OutcomeCancelled Outcome = "Cancelled"
	// OutcomeBudgetExceeded: maxTurns or maxTokens was reached.
	OutcomeBudgetExceeded Outcome = "BudgetExceeded"
	// OutcomeTimedOut: maxDuration was reached.
	OutcomeTimedOut Outcome = "TimedOut"
	// OutcomeError: the runner itself failed (configuration, provider or store errors).
	OutcomeError Outcome = "Error"
	// OutcomeResultInvalid: spec.result asked for a structured result and the agent ended
	// without a valid one.
	OutcomeResultInvalid Outcome = "ResultInvalid"
	// OutcomePushFailed: the agent completed its task but spec.workspace.git.push could not
	// commit or push the work.
	OutcomePushFailed Outcome = "PushFailed"
)

// AgentSessionStatus is the observed state of an AgentSession.
type AgentSessionStatus struct {
	// phase summarises the session's lifecycle: Pending, Running, Succeeded, Failed or
	// Cancelled.
	// +optional
	Phase AgentSessionPhase `json:"phase,omitempty"`

	// conditions: Accepted, PodReady and the summary Succeeded (Unknown while running, True
	// or False when finished), each with the generation it was computed for.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// observedGeneration is the spec generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// sessionID is the journal's id of this session (the AgentSession's uid for a new
	// session; the resumed session's id with resumeFrom).
	// +optional
	SessionID string `json:"sessionID,omitempty"`

	// podName is the name of the current (or last) runner pod.
	// +optional
	PodName string `json:"podName,omitempty"`

	// attempts is the number of runner pods started so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// approvalResumes counts the attempts started to resume after a decision on a paused
	// call; they do not count against retry.maxAttempts.
	// +optional
	ApprovalResumes int32 `json:"approvalResumes,omitempty"`

	// startTime is when the first runner pod was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the session finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// usage is the session's model and tool usage, all attempts together, as the runner
	// last reported it.
	// +optional
	Usage *Usage `json:"usage,omitempty"`

	// pendingApproval is the tool call the session is paused on, while phase is
	// AwaitingApproval.
	// +optional
	PendingApproval *PendingApproval `json:"pendingApproval,omitempty"`

	// result is the session's outcome, set when it finished.
	// +optional
	Result *Result `json:"result,omitempty"`

	// executors are the executor pods of the current attempt (spec.executors), each with its
	// pod and phase.
	// +optional
	// +listType=map
	// +listMapKey=name
	Executors []ExecutorStatus `json:"executors,omitempty"`
}

// ExecutorStatus is where an executor of the current attempt stands.
type ExecutorStatus struct {
	// name of the executor.
	Name string `json:"name"`
	// podName is the executor's pod.
	PodName string `json:"podName"`
	// phase is the pod's phase, or Lost when the pod is gone before the attempt ended.
	// +optional
	Phase string `json:"phase,omitempty"`
	// message says why an executor is not serving, when it is not.
	// +optional
	Message string `json:"message,omitempty"`
}

// PendingApproval is a tool call a session paused on, waiting for a person's decision.
type PendingApproval struct {
	// callID is the call's id; a decision in spec.approvals names it.
	CallID string `json:"callID"`
	// tool is the tool the model called.
	// +optional
	Tool string `json:"tool,omitempty"`
	// preview is the start of the call's arguments.
	// +optional
	Preview string `json:"preview,omitempty"`
	// reason is the reason the hooks gave for asking.
	// +optional
	Reason string `json:"reason,omitempty"`
	// since is when the session paused; approvalTimeout counts from here.
	Since metav1.Time `json:"since"`
}

// Usage counts what a session consumed.
type Usage struct {
	// inputTokens sent to the model, cache reads excluded.
	// +optional
	InputTokens int64 `json:"inputTokens,omitempty"`
	// outputTokens produced by the model.
	// +optional
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// cacheReadTokens served from the provider's prompt cache.
	// +optional
	CacheReadTokens int64 `json:"cacheReadTokens,omitempty"`
	// totalTokens is inputTokens + outputTokens + cacheReadTokens.
	// +optional
	TotalTokens int64 `json:"totalTokens,omitempty"`
	// turns is the number of model turns.
	// +optional
	Turns int32 `json:"turns,omitempty"`
	// toolCalls is the number of tool calls run.
	// +optional
	ToolCalls int32 `json:"toolCalls,omitempty"`
	// compactions is the number of times the conversation was compacted.
	// +optional
	Compactions int32 `json:"compactions,omitempty"`
	// subagents is the number of child agents the session spawned (spawn_agent) in its last
	// attempt; the tokens and turns above count theirs too.
	// +optional
	Subagents int32 `json:"subagents,omitempty"`
	// byAgentType is the children's usage by agent type (persona; "default" for a child
	// spawned without one), in the last attempt: at most 8 entries, the types that used
	// least folded into one named "_other".
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	ByAgentType []AgentTypeUsage `json:"byAgentType,omitempty"`
	// costUSD is what the model calls cost in US dollars, as a decimal string, when the model's
	// price is known.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
}

// AgentTypeUsage is what the subagents of one agent type used.
type AgentTypeUsage struct {
	// name is the persona's name, or "_other".
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// subagents is the number of children of the type spawned.
	// +optional
	Subagents int32 `json:"subagents,omitempty"`
	// turns is their number of model turns.
	// +optional
	Turns int32 `json:"turns,omitempty"`
	// inputTokens sent to the model by them, cache reads excluded.
	// +optional
	InputTokens int64 `json:"inputTokens,omitempty"`
	// outputTokens they produced.
	// +optional
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// cacheReadTokens served to them from the provider's prompt cache.
	// +optional
	CacheReadTokens int64 `json:"cacheReadTokens,omitempty"`
}

// Result is how a finished session ended.
type Result struct {
	// outcome: Completed, Failed, Cancelled, BudgetExceeded, TimedOut, Error, ResultInvalid or
	// PushFailed.
	// +optional
	Outcome Outcome `json:"outcome,omitempty"`
	// summary is a short summary of what the agent did, from its final message.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Summary string `json:"summary,omitempty"`
	// exitCode is the runner's exit code, the same code `aerie run` exits with.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// message explains the outcome for people: the error, the limit reached, the reason
	// the pod was lost.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
	// structured is the structured result spec.result asked for, as the agent submitted it,
	// when it fits in the runner's report (a few KiB; never over 16 KiB). A larger one is
	// only in the session store: see structuredRef.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Structured *runtime.RawExtension `json:"structured,omitempty"`
	// structuredRef says where the session store keeps a structured result that did not fit
	// here; `aerie get NAME --result` prints it from there.
	// +optional
	StructuredRef *StructuredResultRef `json:"structuredRef,omitempty"`
	// commit is the commit spec.workspace.git.push pushed.
	// +optional
	Commit string `json:"commit,omitempty"`
	// branch is the branch the commit was pushed to.
	// +optional
	Branch string `json:"branch,omitempty"`
}

// StructuredResultRef is where the session store keeps a structured result.
type StructuredResultRef struct {
	// sessionID is the stored session that holds the result.
	SessionID string `json:"sessionID"`
	// seq is the sequence number of the result's entry in that session.
	Seq int64 `json:"seq"`
}

// AgentSession runs one AI coding-agent session as a Kubernetes job: the controller starts
// a runner pod that executes the agent loop, journals every entry to the session store and
// reports the outcome here.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ags,categories=aerie
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model.name`
// +kubebuilder:printcolumn:name="Turns",type=integer,JSONPath=`.status.usage.turns`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.usage.totalTokens`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.usage.costUSD`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.result.outcome`,priority=1
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.status.sessionID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentSession struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the session the submitter asks for.
	// +required
	Spec AgentSessionSpec `json:"spec"`

	// status is the session as the controller observed it.
	// +optional
	Status AgentSessionStatus `json:"status,omitempty"`
}

// AgentSessionList is a list of AgentSessions.
//
// +kubebuilder:object:root=true
type AgentSessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentSession `json:"items"`
}

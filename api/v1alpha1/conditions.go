package v1alpha1

// Condition types of an AgentSession.
const (
	// ConditionAccepted is True once the controller has validated the session's references
	// (prompt source, layers, secrets) and rendered the runner configuration; False with a
	// reason when it cannot, which also fails the session.
	ConditionAccepted = "Accepted"

	// ConditionPodReady is True while the current runner pod is running.
	ConditionPodReady = "PodReady"

	// ConditionSucceeded is the summary condition, with the semantics of a batch job: Unknown
	// while the session has not finished, True when it finished with outcome Completed, False
	// when it finished in any other way.
	ConditionSucceeded = "Succeeded"

	// ConditionAwaitingApproval is True while the session is paused on a tool call a hook
	// asks a person about, the message naming the call; False once the session resumed.
	ConditionAwaitingApproval = "AwaitingApproval"

	// ConditionPushed is True when spec.workspace.git.push pushed the work (reason Pushed) or
	// found nothing to push (NothingToPush); False when the push failed (PushFailed).
	ConditionPushed = "Pushed"
)

// Condition reasons of an AgentSession.
const (
	// ReasonPending: waiting for the runner pod to be created or scheduled.
	ReasonPending = "Pending"
	// ReasonRunning: the runner pod is running the agent.
	ReasonRunning = "Running"
	// ReasonCompleted: the agent finished its task.
	ReasonCompleted = "Completed"
	// ReasonAgentFailed: the agent ended without finishing its task.
	ReasonAgentFailed = "AgentFailed"
	// ReasonCancelled: spec.cancel stopped the session.
	ReasonCancelled = "Cancelled"
	// ReasonBudgetExceeded: maxTurns or maxTokens was reached.
	ReasonBudgetExceeded = "BudgetExceeded"
	// ReasonDeadlineExceeded: maxDuration was reached.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonPodLost: the runner pod disappeared or was evicted, OOM-killed or its node lost.
	ReasonPodLost = "PodLost"
	// ReasonRetrying: a new attempt resumes the session after the pod was lost.
	ReasonRetrying = "Retrying"
	// ReasonRetriesExhausted: the pod was lost and retry.maxAttempts was reached.
	ReasonRetriesExhausted = "RetriesExhausted"
	// ReasonRunnerError: the runner failed for a reason of its own (configuration, provider,
	// store).
	ReasonRunnerError = "RunnerError"
	// ReasonInvalidReference: a referenced ConfigMap, Secret, key or session does not exist.
	ReasonInvalidReference = "InvalidReference"
	// ReasonResultInvalid: spec.result asked for a structured result and the agent ended
	// without a valid one.
	ReasonResultInvalid = "ResultInvalid"
	// ReasonApprovalRequested: a hook asked a person about a tool call (hookApproval ask).
	ReasonApprovalRequested = "ApprovalRequested"
	// ReasonApprovalDecided: spec.approvals decided the paused call; the session resumed.
	ReasonApprovalDecided = "ApprovalDecided"
	// ReasonApprovalTimedOut: approvalTimeout passed without a decision; the call was denied.
	ReasonApprovalTimedOut = "ApprovalTimedOut"
	// ReasonPushed: the workspace's changes were committed and pushed.
	ReasonPushed = "Pushed"
	// ReasonNothingToPush: the workspace had no changes to commit; nothing was pushed.
	ReasonNothingToPush = "NothingToPush"
	// ReasonPushFailed: the work could not be committed or pushed.
	ReasonPushFailed = "PushFailed"
	// ReasonAccepted: references resolved and the runner configuration rendered.
	ReasonAccepted = "Accepted"
)

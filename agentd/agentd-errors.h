/* SPDX-License-Identifier: MIT */
#pragma once

/* The errors of org.agentix.Agentd1 (org.agentix.Agentd1(5)): each with a message a person can
 * act on. */

#define AGENTD_ERROR_PREFIX "org.agentix.Agentd1."
#define AGENTD_ERROR_NO_SUCH_SANDBOX AGENTD_ERROR_PREFIX "NoSuchSandbox"
#define AGENTD_ERROR_INVALID_CONFIG AGENTD_ERROR_PREFIX "InvalidConfig"
#define AGENTD_ERROR_IMAGE_NOT_FOUND AGENTD_ERROR_PREFIX "ImageNotFound"
#define AGENTD_ERROR_BUNDLE_NOT_FOUND AGENTD_ERROR_PREFIX "BundleNotFound"
#define AGENTD_ERROR_BACKEND_UNAVAILABLE AGENTD_ERROR_PREFIX "BackendUnavailable"
#define AGENTD_ERROR_START_FAILED AGENTD_ERROR_PREFIX "StartFailed"
#define AGENTD_ERROR_TOO_MANY_SANDBOXES AGENTD_ERROR_PREFIX "TooManySandboxes"
#define AGENTD_ERROR_NOT_OWNER AGENTD_ERROR_PREFIX "NotOwner"

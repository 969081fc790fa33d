/* SPDX-License-Identifier: MIT */
#pragma once

/* An image reference as `docker tag` takes it: REPOSITORY[:TAG], TAG "latest" when absent. */

/* Split ref. -EINVAL when it is no image name: REPOSITORY is lower-case letters, digits and
 * . _ - / (a registry host may add :PORT before the first /), TAG up to 128 of letters, digits,
 * _ . - not starting with . or -. */
int image_ref_split(const char *ref, char **ret_repository, char **ret_tag);

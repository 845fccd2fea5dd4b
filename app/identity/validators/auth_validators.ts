import vine from '@vinejs/vine'

const email = () => vine.string().trim().maxLength(254)

export const registerValidator = vine.create({
  email: email().email(),
  username: vine
    .string()
    .minLength(3)
    .maxLength(30)
    .regex(/^[a-z0-9_]+$/),
  password: vine.string().minLength(8).maxLength(128),
  referralCode: vine.string().trim().maxLength(32).nullable().optional(),
})

export const resendVerificationValidator = vine.create({
  email: email(),
})

export const loginValidator = vine.create({
  email: email(),
  password: vine.string().maxLength(1024),
})

export const refreshValidator = vine.create({
  refreshToken: vine.string().maxLength(512).optional(),
})

export const apiKeyValidator = vine.create({
  label: vine.string().trim().minLength(1).maxLength(100),
})

export const markReadValidator = vine.create({
  ids: vine.array(vine.string().maxLength(64)).maxLength(1000),
})

/** POST /auth/password/change. */
export const changePasswordValidator = vine.create({
  currentPassword: vine.string().maxLength(1024),
  newPassword: vine.string().minLength(8).maxLength(128),
})

/** POST /auth/password/forgot. */
export const forgotPasswordValidator = vine.create({
  email: vine.string().trim().maxLength(254),
})

/** POST /auth/password/reset. */
export const resetPasswordValidator = vine.create({
  token: vine.string().trim().minLength(20).maxLength(100),
  password: vine.string().minLength(8).maxLength(128),
})

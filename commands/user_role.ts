import { BaseCommand, args } from '@adonisjs/core/ace'
import type { CommandOptions } from '@adonisjs/core/types/ace'

/**
 * `node ace user:role <email> <role>`: sets an account's role (user,
 * support, operator, admin), e.g. to appoint the first staff members.
 */
export default class UserRole extends BaseCommand {
  static commandName = 'user:role'
  static description = "Set a user's role: user, support, operator or admin"
  static options: CommandOptions = { startApp: true }

  @args.string({ description: 'E-mail address of the account' })
  declare email: string

  @args.string({ description: 'Role: user, support, operator or admin' })
  declare role: string

  async run() {
    const { isRole, roles } = await import('#identity/models/user')
    const { setRole } = await import('#identity/services/account_service')

    if (!isRole(this.role)) {
      this.logger.error(`Unknown role "${this.role}"; use one of: ${roles.join(', ')}`)
      this.exitCode = 1
      return
    }
    const user = await setRole(this.email, this.role)
    if (!user) {
      this.logger.error(`No account with the e-mail address ${this.email}`)
      this.exitCode = 1
      return
    }
    this.logger.success(`${user.email} is now ${user.role}`)
  }
}

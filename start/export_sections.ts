/*
|--------------------------------------------------------------------------
| Data export sections
|--------------------------------------------------------------------------
|
| Every section of the personal data export (#identity/services/export_sections),
| each collected by its area's service. The order here is the order of the
| files in the export and in its manifest (the one the export always had).
|
*/
import { exportSections } from '#identity/services/export_sections'
import {
  apiKeysForExport,
  notificationsForExport,
  profileForExport,
} from '#identity/services/identity_export_sections'
import { creditLedgerForExport } from '#credits/services/credits_service'
import { ticketsOf } from '#support/services/ticket_service'
import { addonSubscriptionsForExport, paymentsForExport } from '#billing/services/billing_export'
import { referralRewardsForExport } from '#referrals/services/referral_service'
import { conversationsForExport } from '#chat/services/history_service'
import { agentsForExport } from '#agents/services/agent_service'

exportSections.register('credit_ledger', creditLedgerForExport)
exportSections.register('referral_rewards', referralRewardsForExport)
exportSections.register('support_tickets', ticketsOf)
exportSections.register('payments', paymentsForExport)
exportSections.register('addon_subscriptions', addonSubscriptionsForExport)
exportSections.register('profile', profileForExport)
exportSections.register('api_keys', apiKeysForExport)
exportSections.register('notifications', notificationsForExport)
exportSections.register('conversations', conversationsForExport)
exportSections.register('agents', agentsForExport)

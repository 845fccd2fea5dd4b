/*
|--------------------------------------------------------------------------
| API contracts
|--------------------------------------------------------------------------
|
| What each route takes and answers (app/<area>/api_contracts.ts), by route
| name: /openapi.json is built from these and the live router
| (#core/openapi/document_builder).
|
*/
import { apiContracts } from '#core/openapi/contracts'
import coreContracts from '#core/openapi/core_contracts'
import creditsContracts from '#credits/api_contracts'
import referralsContracts from '#referrals/api_contracts'
import skillsContracts from '#skills/api_contracts'
import knowledgeContracts from '#knowledge/api_contracts'
import toolsContracts from '#tools/api_contracts'
import channelsContracts from '#channels/api_contracts'
import schedulesContracts from '#schedules/api_contracts'
import supportContracts from '#support/api_contracts'
import billingContracts from '#billing/api_contracts'
import identityContracts from '#identity/api_contracts'
import chatContracts from '#chat/api_contracts'
import agentsContracts from '#agents/api_contracts'
import backupsContracts from '#backups/api_contracts'

for (const contracts of [
  creditsContracts,
  referralsContracts,
  skillsContracts,
  knowledgeContracts,
  toolsContracts,
  channelsContracts,
  schedulesContracts,
  supportContracts,
  billingContracts,
  identityContracts,
  chatContracts,
  agentsContracts,
  backupsContracts,
  coreContracts,
]) {
  apiContracts.register(contracts)
}

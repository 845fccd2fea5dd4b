/*
|--------------------------------------------------------------------------
| Knowledge in chat
|--------------------------------------------------------------------------
|
| The knowledge area plugs its passages into the chat's system prompt (the
| chat area does not import the knowledge area).
|
*/
import { registerKnowledgeSource } from '#chat/services/system_prompt'
import { relevantPassages } from '#knowledge/services/knowledge_service'

// No chunks, no passages: the chat routes learn that with the agent row and skip the search.
registerKnowledgeSource(relevantPassages, {
  presenceSql: 'exists (select 1 from knowledge_chunks k where k.agent_id = agents.id)',
})

"""The built-in prompt vocabulary."""

# Common English words that are a single token (with their leading space) in the GPT, Llama and
# Qwen BPE vocabularies, so that N words make a prompt of about N tokens without a tokenizer.
_WORDS = (
    "the of and to in is was for on that with as by at from his it an were are which be this "
    "had not or have one but they first new their has been after who two all more she other "
    "time also its into only over year most some her would than when may up there about made "
    "can out many three city world used such where well these known between no school then "
    "during under life state them through so later part family while both him name before "
    "since each four group very high number work became because area day several what any war "
    "found same second long five early being best back until did house will water old home "
    "team end last public based government music film book game land road river town north "
    "south east west light line market power party light show play open book car field hand "
    "head side face view west point story place way man case week company system program "
    "question night money fact month lot right study job word business issue kind service "
    "friend father power hour game line member law car door office health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education foot boy age policy process music market sense nation plan college interest "
    "death experience effect use class control care field development role effort rate heart "
    "drug show leader light voice wife police mind price report decision son view relationship"
).split()
WORDS = tuple(dict.fromkeys(_WORDS))  # dedupe, keep order

"""The instruction templates of task drafts: three wordings per intent, and the words of the
comparison ops. Apart from the builders because instructions are also re-worded from them
(``defects.reword`` swaps a task's template for another of its intent).
"""

TEMPLATES: dict[str, tuple[str, ...]] = {
    "read_field": (
        "What is the {field} of the {table} '{key}'?",
        "Look up the {table} {key} and tell me its {field}.",
        "Report the {field} recorded for {table} '{key}'.",
    ),
    "read_hop": (
        "What is the {field} of the {target} that {table} '{key}' points to as its {ref}?",
        "Find the {ref} of {table} {key} and report that {target}'s {field}.",
        "{table} '{key}' has a {ref}; what is the {field} of that {target}?",
    ),
    "find_by_value": (
        "Which {table} has {field} {value}? Answer with its {keyfield}.",
        "Find the {table} whose {field} is {value} and report its {keyfield}.",
        "One {table} has {value} as its {field}. What is its {keyfield}?",
    ),
    "count_filter": (
        "How many {table} records have {field} {op} {value}?",
        "Count the {table} records whose {field} is {op} {value}.",
        "Tell me the number of {table} records with {field} {op} {value}.",
    ),
    "count": (
        "How many {table} records have {field} {value}?",
        "Count the {table} records whose {field} is {value}.",
        "What is the number of {table} records with {field} equal to {value}?",
    ),
    "sum": (
        "What is the total {total} over the {table} records whose {field} is {value}?",
        "Add up the {total} of every {table} with {field} {value} and report the sum.",
        "Sum the {total} of all {table} records that have {field} {value}.",
    ),
    "set_field": (
        "Set the {field} of the {table} '{key}' to {value}.",
        "Change {table} {key} so that its {field} is {value}.",
        "Update the {table} '{key}': its {field} should become {value}.",
    ),
    "add_field": (
        "Increase the {field} of the {table} '{key}' by {value}.",
        "Add {value} to the {field} of {table} {key}.",
        "Raise the {field} of {table} '{key}' by {value}.",
    ),
    "link": (
        "Set the {ref} of the {table} '{key}' to the {target} '{target_key}'.",
        "Link {table} {key} to {target} {target_key} as its {ref}.",
        "Make {target} '{target_key}' the {ref} of {table} '{key}'.",
    ),
    "create": (
        "Create a new {table} '{key}' with {values}.",
        "Add a {table} named {key} that has {values}.",
        "Register the {table} '{key}': {values}.",
    ),
    "delete": ("Delete the {table} '{key}'.", "Remove {table} {key}.", "Get rid of the {table} record '{key}'."),
    "transition": (
        "Move the {table} '{key}' to {field} '{value}'.",
        "Change the {field} of {table} {key} to {value}.",
        "Put {table} '{key}' into the {value} {field}.",
    ),
}
OP_WORDS = {"eq": "equal to", "lt": "less than", "gt": "greater than"}

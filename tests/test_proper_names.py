"""Names as a question writes them (brain_sql/proper_names.py), which quality's
`stranger` reads: whom a question is about, and whether an answer names them."""

import pytest

from brain_sql.proper_names import names_in, names_itself


@pytest.mark.parametrize(
    "text, names",
    [
        ("What did Anna research?", ["Anna"]),
        ("What is Anna's identity?", ["Anna"]),
        ("Anna went home.", []),  # a capitalised word opening a sentence names no one by itself
        ("Which region is Corey Taylor's city of birth located?", ["Corey Taylor"]),
        ("Where did Tom go in May, on a Monday?", ["Tom"]),  # months and days name no one
        ('Does Tom like "The Four Seasons" by Vivaldi?', ["Tom", "Four Seasons", "Vivaldi"]),
        ("Localization of Rad51 and N-cadherin in Aire-expressing cells", []),
        ("Deltex interacts with eIF3. There is no known interaction between Deltex and elF3", ["Deltex"]),
        ("no names here, and I said so", []),
    ],
)
def test_the_names_a_question_writes(text, names):
    assert names_in(text) == names


@pytest.mark.parametrize(
    "text, name, named",
    [
        ("She met Anna. Then they left.", "Anna", True),
        ("Anna went home.", "Anna", True),
        ("Anna Pavlova danced the dying swan.", "Anna", False),  # only inside a longer name
        ("Dancers such as Anna Pavlova toured.", "Pavlova", False),
        ("In San Francisco the study ran.", "Francisco", False),
        ("Songs by Elton John.", "John", False),
        ("The ballet of Queen Anna was staged.", "Anna", False),
        ("The ballet was staged. Anna danced.", "Anna", True),
        ("Before him, Pavlova danced it.", "Pavlova", True),
        ("In San Francisco the study ran.", "San Francisco", True),  # "In" opens the sentence
        ("Big Ben\nBig Ben is the bell in the tower in which Big Ben hangs.", "Ben", False),
        ("the putative E3 ubiquitin ligase Deltex1 binds", "Deltex", True),  # a number may follow
        ("Annabel planted tomatoes.", "Anna", False),
        ("ANNA and anna", "Anna", True),  # in any case
        ("nobody at all", "Anna", False),
    ],
)
def test_whether_a_text_names_someone_as_that_name(text, name, named):
    assert names_itself(text, name) is named

"""An eighth case set for bench/eval_validate.py (``--cases blind5``): turns taken verbatim from the dev data
(/work/shared/data/dev: locomo_dev.json, spc_valid.csv, swda_val.txt), drawn at random (seed 3705, turns of 45-260
characters, at most one turn per LoCoMo session or persona chat in a draw) from the LoCoMo sessions, persona-chat rows
and Switchboard stretches that no earlier set used: every turn of the earlier sets was looked up in the dev data first
(blind4 and tune36 took LoCoMo sessions conv-26 7-9 / 12-16, conv-30 4 / 8 / 14 / 15, conv-41 2 / 5 / 7 / 18 / 23 /
24 / 28 / 32, conv-42 3 / 10 / 19 / 23 / 24 / 29, conv-43 3 / 8 / 14 / 22 / 24 / 26, 70 persona-chat rows and
Switchboard lines 198-2480 of six stretches; blind, blind2, blind3, heldout, old and most of fresh were written, not
drawn), and those were left out (Switchboard: 80 lines either side of a used line).

Facts were written blind by stop 37, before reading the validator's code, its word lists (factforge/data/,
patterns/, factforge/models/prompts/) or its tests; of the earlier case sets only eval_validate.py (docstring and old
cases) and blind4's docstring and format were read. The set was frozen (committed) and measured once before the
validator was changed; it is not tuned on. Case errors found afterwards are fixed only when the case itself is wrong
(a "true" fact the turn does not say, or an "invented" fact the turn does say), and listed at the end of this
docstring.

Each case is (turn, true facts, invented facts), facts as (content, category), phrased as a small local model writes
them: "User" as the subject (the speaker of the turn), "their" for the user, near-verbatim facts, light paraphrases
and synonyms, short facts and plain entailments. ``invented`` facts go wrong one way each: another object of the same
kind, roles swapped, the turn negated, a detail the turn does not give, a wrong number or time, a plan told as done.
Turns that said nothing about the speaker were skipped, not rewritten.

Turns: 26 from LoCoMo, 21 from the persona chats, 7 from Switchboard.

Case errors fixed after the first measurement: none.
"""

from __future__ import annotations

Case = tuple[str, list[tuple[str, str]], list[tuple[str, str]]]

BLIND5: list[Case] = [
    # --- LoCoMo ---
    ("Thanks for askin', Gina! Losing my job was hard, but I'm livin' my dreams now. Startin' my biz has been tough "
     "but I'm gonna make it! I keep facing new challenges, but I'm sure it'll be worth it in the end.",
     [("User lost their job", "other"), ("User is starting a business", "other"),
      ("User found losing their job hard", "other"), ("User is facing new challenges", "other")],
     [("User was promoted at work", "other"), ("User gave up on their business", "decision")]),
    ("Hi Jon! So happy you're pushing forward with dancing! Inspiring 💪 I emailed some wholesalers and one replied and "
     "said yes today! I'm over the moon because now I can expand my clothing store and get closer to my customers. "
     "Check it out - here's a pic!",
     [("User has a clothing store", "identity"), ("User emailed some wholesalers", "other"),
      ("A wholesaler agreed to work with User", "other"), ("User can expand their clothing store", "decision"),
      ("User is very happy", "other")],
     [("User owns a shoe store", "identity"), ("User closed their clothing store", "decision"),
      ("All the wholesalers said no", "other")]),
    ("Thanks! The event was awesome. I met some investors and got some good advice. The energy was really motivating, "
     "it gave me a boost to go after my goals.",
     [("User met some investors at an event", "other"), ("User got good advice", "other"),
      ("User enjoyed the event", "preference"), ("The event motivated User", "other")],
     [("User got funding from investors", "other"), ("User spoke at the event", "other")]),
    ("Thanks, Nate! I took that pic on a hike last summer near Fort Wayne. The sunset and the surrounding beauty were "
     "just incredible. It was an awesome reminder of nature's beauty.",
     [("User went hiking near Fort Wayne last summer", "temporal"), ("User took a photo on a hike", "other"),
      ("User hikes", "identity"), ("User appreciates nature's beauty", "other")],
     [("User went hiking near Chicago", "other"), ("User took the photo last winter", "temporal")]),
    ("Hey Nate, long time no see! My laptop crashed last week and I lost all my work - super frustrating! As a "
     "writer, my laptop is like half of my lifeline so losing all progress was like a major blow.",
     [("User is a writer", "identity"), ("User's laptop crashed last week", "temporal"),
      ("User lost all their work", "other"), ("User was frustrated", "other")],
     [("User bought a new laptop last week", "temporal"), ("User is a photographer", "identity"),
      ("User's phone broke", "other")]),
    ("You're a real bookworm! It would be awesome to go to a book conference with you. Check out this photo of what my "
     "teammates gave me when we met. It's a sign of our friendship and all the love we have for each other.",
     [("User's teammates gave them a gift", "relationship"), ("User has teammates", "relationship"),
      ("User would like to go to a book conference", "preference")],
     [("User gave their teammates a gift", "relationship"), ("User went to a book conference", "other")]),
    ("Hey, we should go together sometime, don't you think? Maybe I'll start to think of a drama myself and publish my "
     "own screenplay.",
     [("User might write a screenplay", "decision"), ("User is thinking about publishing a screenplay", "decision")],
     [("User published a screenplay", "other"), ("User wrote a comedy", "other")]),
    ("I am writing another movie script! It's a love story with lots of challenges. I've put lots of hard work into it "
     "and I'm hoping to get it on the big screen.",
     [("User is writing a movie script", "other"), ("User is writing a love story", "other"),
      ("User writes movie scripts", "identity"), ("User hopes their script will be made into a movie", "decision"),
      ("User has written a script before", "other")],
     [("User is writing a horror movie", "other"), ("User's script was made into a film", "other"),
      ("User is writing a novel", "other")]),
    ("Thanks, Maria! They're doing great. Our one-year-old is so cute, his name is Kyle!",
     [("User has a one-year-old son", "relationship"), ("User's son is named Kyle", "relationship"),
      ("User has a child named Kyle", "relationship"), ("User's son Kyle is one year old", "relationship")],
     [("User has a daughter named Kyle", "relationship"), ("User's son Kyle is three", "relationship")]),
    ("Thanks! I've watched a bunch of them and they're inspiring. My favorite character is Aragorn, he grows so much "
     "throughout the story.",
     [("User's favorite character is Aragorn", "preference"), ("User likes Aragorn", "preference"),
      ("Aragorn is User's favorite character", "preference")],
     [("User's favorite character is Gandalf", "preference"), ("User dislikes Aragorn", "preference")]),
    ("Sounds fun! I probably also have loads of books I haven't read in years. Sounds like a blast from the past!",
     [("User has a lot of books", "identity"), ("User has books they haven't read in years", "other")],
     [("User has no books", "identity"), ("User reads every day", "identity")]),
    ("Thanks! I'm gonna stay in Galway, it's great for its arts and Irish music. This place has such a vibrant "
     "atmosphere.",
     [("User is going to stay in Galway", "decision"), ("User will stay in Galway", "decision"),
      ("User thinks Galway is great for arts and Irish music", "preference"), ("User likes Galway", "preference")],
     [("User is going to stay in Dublin", "decision"), ("User dislikes Irish music", "preference"),
      ("User lives in Galway permanently", "identity")]),
    ("Wow, Nate! That's awesome. I love the tech and funny jokes of Iron Man too. What made you get that figure?",
     [("User loves Iron Man", "preference"), ("User likes Iron Man's jokes", "preference"),
      ("User likes the tech of Iron Man", "preference")],
     [("User loves Captain America", "preference"), ("User bought an Iron Man figure", "other")]),
    ("I've been playing for about four months now and it's been an amazing adventure. I'm really enjoying the progress "
     "I've been making.",
     [("User has been playing for about four months", "temporal"), ("User enjoys their progress", "preference"),
      ("User is making progress", "other")],
     [("User has been playing for four years", "temporal"), ("User has stopped playing", "other")]),
    ("Yo Tim! Great to hear from you. Things have been wild! Last week I got this amazing deal with a renowned outdoor "
     "gear company. So pumped!",
     [("User got a deal with an outdoor gear company last week", "temporal"),
      ("User signed a deal with an outdoor gear company", "other"), ("User is excited about the deal", "other")],
     [("User got a deal with a shoe company", "other"), ("User lost a deal last week", "temporal"),
      ("User works for an outdoor gear company", "identity")]),
    ("Barcelona sounds awesome! I've heard so many great things. Definitely adding it to my list. Thanks!",
     [("User wants to visit Barcelona", "preference"), ("User is adding Barcelona to their list", "decision"),
      ("User has heard great things about Barcelona", "other")],
     [("User has been to Barcelona", "other"), ("User lives in Barcelona", "identity")]),
    ("Totally agree, Mel. Relaxing and expressing ourselves is key. Well, I'm off to go do some research.",
     [("User is going to do some research", "decision"), ("User thinks relaxing is important", "other")],
     [("User is going to bed", "decision"), ("User is a researcher", "identity")]),
    ("I'm gonna chat with local leaders and organizations, get support and gather ideas for my next move.",
     [("User plans to talk with local leaders", "decision"), ("User will chat with local organizations", "decision"),
      ("User wants to gather ideas for their next move", "decision")],
     [("User is a local leader", "identity"), ("User is moving to another city", "decision")]),
    ("Definitely! They encourage me when I'm down too. It's not just in my sport, but in other aspects of life too. We "
     "hang out a lot and it's great having that bond.",
     [("User plays a sport", "identity"), ("User gets encouragement when they are down", "other")],
     [("User doesn't play any sport", "identity"), ("User rarely sees them", "relationship")]),
    ("Yeah, at the event, I had a conversation with someone named David. Hearing his story of hardship and how he "
     "ended up in difficult circumstances was so humbling. It just showed me that everyone has their own story and "
     "deserves understanding.",
     [("User talked with David at the event", "other"), ("User met someone named David", "relationship"),
      ("User found David's story humbling", "other"), ("User thinks everyone deserves understanding", "other")],
     [("User's brother is named David", "relationship"), ("User told David their story", "other")]),
    ("Since we last spoke, some big things have happened. Last week I went to an LGBTQ+ pride parade. Everyone was so "
     "happy and it made me feel like I belonged. It showed me how much our community has grown, it was amazing!",
     [("User went to an LGBTQ+ pride parade last week", "temporal"), ("User went to a pride parade", "other"),
      ("User felt like they belonged at the parade", "other"), ("User enjoyed the pride parade", "preference")],
     [("User organized a pride parade", "other"), ("User went to a pride parade last year", "temporal"),
      ("User felt out of place at the parade", "other")]),
    ("Thanks, Gina! Seeing my goals written down on paper really helps keep me motivated and focused on what I have "
     "to do. I know it won't be easy, but I'm sure it'll pay off. Thanks for the support!",
     [("User writes down their goals", "identity"), ("Writing down goals keeps User motivated", "other"),
      ("User has goals written on paper", "other")],
     [("User keeps their goals in an app", "identity"), ("User thinks it will be easy", "other")]),
    ("Nice one, Maria! Staying in shape is important to me too. I'm trying out different workout regimes lately. "
     "Rock climbing sounds like a fun way to push my limits, have you ever given it a go?",
     [("Staying in shape is important to User", "preference"), ("User is trying different workouts", "other"),
      ("User thinks rock climbing sounds fun", "preference")],
     [("User goes rock climbing every week", "identity"), ("User doesn't care about fitness", "preference")]),
    ("I loved reading \"Charlotte's Web\" as a kid. It was so cool seeing how friendship and compassion can make a "
     "difference.",
     [("User loved reading Charlotte's Web as a kid", "preference"), ("User read Charlotte's Web as a child", "other"),
      ("User liked Charlotte's Web", "preference")],
     [("User loved reading Harry Potter as a kid", "preference"), ("User wrote Charlotte's Web", "other")]),
    ("Wow, that book is great! I read it a while back and it really changed my perspective on my goals. I'm glad it had "
     "the same impact on you!",
     [("User read the book a while back", "other"), ("The book changed User's perspective on their goals", "other"),
      ("User thinks the book is great", "preference")],
     [("User hasn't read the book", "other"), ("User read the book last week", "temporal")]),
    ("Thanks, Maria! I like to just take a look at the sunset- it reminds me to enjoy the small things in life.",
     [("User likes watching the sunset", "preference"), ("User enjoys sunsets", "preference"),
      ("Sunsets remind User to enjoy the small things", "other")],
     [("User likes watching the sunrise", "preference"), ("User photographs sunsets for a living", "identity")]),
    # --- persona chats ---
    ("I like to read, go for walks, and watch movies.",
     [("User likes to read", "preference"), ("User likes going for walks", "preference"),
      ("User enjoys watching movies", "preference"), ("User likes reading", "preference")],
     [("User likes to run", "preference"), ("User dislikes movies", "preference")]),
    ("I'm not sure yet. I might go out to eat with some friends.",
     [("User might go out to eat with friends", "decision"), ("User has friends", "relationship")],
     [("User is cooking dinner at home", "decision"), ("User went out to eat with their family", "other")]),
    ("I also love \"Sweet Home Alabama\" by Lynyrd Skynyrd.",
     [("User loves Sweet Home Alabama", "preference"), ("User likes Lynyrd Skynyrd", "preference"),
      ("User loves the song Sweet Home Alabama by Lynyrd Skynyrd", "preference")],
     [("User loves Free Bird", "preference"), ("User is from Alabama", "identity")]),
    ("Me too! I love trying new recipes and experimenting with new flavors.",
     [("User loves trying new recipes", "preference"), ("User likes to cook", "preference"),
      ("User enjoys experimenting with flavors", "preference")],
     [("User is a professional chef", "identity"), ("User hates cooking", "preference")]),
    ("I do! I've been playing roleplaying games for years, so I've had a lot of time to come up with some interesting "
     "stories.",
     [("User plays roleplaying games", "identity"), ("User has played roleplaying games for years", "identity"),
      ("User comes up with stories", "other"), ("User likes roleplaying games", "preference")],
     [("User just started playing roleplaying games", "identity"), ("User writes novels", "identity")]),
    ("I'm doing great, thanks! I'm looking forward to moving into my new apartment with my boyfriend.",
     [("User has a boyfriend", "relationship"), ("User is moving into a new apartment", "decision"),
      ("User will move in with their boyfriend", "decision"), ("User is excited to move", "preference")],
     [("User has a girlfriend", "relationship"), ("User bought a house", "other"),
      ("User is moving in with their parents", "decision")]),
    ("My favorite pizza place is a small, family-owned pizza shop in my hometown.",
     [("User's favorite pizza place is in their hometown", "preference"), ("User likes pizza", "preference"),
      ("User's favorite pizza place is a small family-owned shop", "preference")],
     [("User owns a pizza shop", "identity"), ("User's favorite pizza place is a big chain", "preference")]),
    ("My first project was a small house in the suburbs. It was a lot of work, but I was so proud when it was "
     "finished.",
     [("User's first project was a small house", "other"), ("User built a house in the suburbs", "other"),
      ("User was proud of their first project", "other")],
     [("User's first project was an office tower", "other"), ("User lives in the suburbs", "identity")]),
    ("That must be fun! I always wanted to teach younger kids.",
     [("User always wanted to teach younger kids", "preference"), ("User wants to teach children", "preference")],
     [("User teaches younger kids", "identity"), ("User has kids", "relationship")]),
    ("Hey, I'm a descendant of Christopher Columbus!",
     [("User is a descendant of Christopher Columbus", "identity"), ("User is related to Christopher Columbus", "identity")],
     [("User is a descendant of George Washington", "identity"), ("User is from Italy", "identity")]),
    ("I like the cows the best. They're so gentle and they give us milk.",
     [("User likes cows best", "preference"), ("User likes cows", "preference"),
      ("User thinks cows are gentle", "other")],
     [("User likes pigs best", "preference"), ("User is afraid of cows", "preference")]),
    ("I am! I can't wait to go home and see my mom.",
     [("User is going home to see their mom", "decision"), ("User has a mom", "relationship"),
      ("User is excited to see their mother", "preference")],
     [("User lives with their mom", "relationship"), ("User is going to see their dad", "decision")]),
    ("That's amazing! I've always wanted to see a wrestling match live.",
     [("User wants to see a wrestling match live", "preference"), ("User has never seen a live wrestling match", "other"),
      ("User is interested in wrestling", "preference")],
     [("User is a wrestler", "identity"), ("User went to a wrestling match", "other")]),
    ("I'm not sure I could pick just one. I love so many of them. But one of my favorites is \"The Pillars of the "
     "Earth\" by Ken Follett.",
     [("One of User's favorite books is The Pillars of the Earth", "preference"),
      ("User likes The Pillars of the Earth by Ken Follett", "preference"), ("User likes Ken Follett", "preference")],
     [("User's favorite book is The Hobbit", "preference"), ("User dislikes Ken Follett", "preference")]),
    ("I am a graduate student and I also walk dogs for a living.",
     [("User is a graduate student", "identity"), ("User walks dogs for a living", "identity"),
      ("User is a dog walker", "identity"), ("User is a student", "identity")],
     [("User is an undergraduate", "identity"), ("User is a dog groomer", "identity"),
      ("User owns dogs", "identity")]),
    ("I like to play video games, watch movies, and spend time with my friends and family.",
     [("User likes video games", "preference"), ("User likes to watch movies", "preference"),
      ("User likes spending time with friends and family", "preference"), ("User plays video games", "identity")],
     [("User likes board games", "preference"), ("User dislikes spending time with family", "preference")]),
    ("Oh cool! I like to play chess too. Do you have a favorite opening?",
     [("User likes to play chess", "preference"), ("User plays chess", "identity"), ("User likes chess", "preference")],
     [("User likes to play checkers", "preference"), ("User is a chess grandmaster", "identity")]),
    ("That sounds like a lot of fun! I like to read books too.",
     [("User likes to read books", "preference"), ("User likes reading", "preference"), ("User reads", "identity")],
     [("User writes books", "identity"), ("User dislikes reading", "preference")]),
    ("Me too! My favorite song right now is \"Blinding Lights\" by The Weeknd.",
     [("User's favorite song is Blinding Lights", "preference"), ("User likes The Weeknd", "preference"),
      ("User's current favorite song is Blinding Lights by The Weeknd", "preference")],
     [("User's favorite song is Starboy", "preference"), ("User's favorite singer is Drake", "preference")]),
    ("I'm not a big fan of horror movies, but I do like some of them.",
     [("User is not a big fan of horror movies", "preference"), ("User likes some horror movies", "preference")],
     [("User loves horror movies", "preference"), ("User hates all horror movies", "preference")]),
    ("That sounds like a lot of fun! I love to travel too. I've been to a few different countries, but I'd love to see "
     "more.",
     [("User loves to travel", "preference"), ("User has been to a few countries", "other"),
      ("User wants to visit more countries", "preference"), ("User likes traveling", "preference")],
     [("User has never left their country", "other"), ("User has been to over fifty countries", "other")]),
    # --- Switchboard ---
    ("My daughter was a freshman in college when we bought it for her.",
     [("User has a daughter", "relationship"), ("User's daughter went to college", "relationship"),
      ("User's daughter was a college freshman", "relationship")],
     [("User has a son", "relationship"), ("User's daughter bought it herself", "other")]),
    ("And we've been really pleased with Oldsmobiles.",
     [("User is pleased with Oldsmobiles", "preference"), ("User likes Oldsmobiles", "preference")],
     [("User is unhappy with Oldsmobiles", "preference"), ("User likes Fords", "preference")]),
    ("And I made a necklace that I saw in a gallery for three hundred twenty dollars",
     [("User made a necklace", "other"), ("User saw a necklace in a gallery", "other"),
      ("User made a necklace they saw in a gallery", "other")],
     [("User bought a necklace for three hundred twenty dollars", "other"), ("User made a bracelet", "other")]),
    ("Both of our cars are getting, oh, around sixty thousand miles on them.",
     [("User has two cars", "identity"), ("User's cars have about sixty thousand miles", "other")],
     [("User has three cars", "identity"), ("User's cars have about ten thousand miles", "other")]),
    ("I usually wear jeans and stuff to classes or shorts in the summertime.",
     [("User wears jeans to classes", "identity"), ("User wears shorts in the summer", "identity"),
      ("User takes classes", "identity")],
     [("User wears a suit to work", "identity"), ("User wears shorts in the winter", "identity")]),
    ("But he's not a real, he's not a real tall, uh, dog for a Golden Retriever.",
     [("User has a Golden Retriever", "identity"), ("User's dog is not very tall", "other")],
     [("User has a Labrador", "identity"), ("User's dog is very tall", "other")]),
    ("Uh, we just bought, uh, acre, a house with an acre to try to, so she'll have some room to walk around, and not "
     "off of a busy street.",
     [("User just bought a house", "other"), ("User bought a house with an acre", "other"),
      ("User's new house is not on a busy street", "other")],
     [("User rents an apartment", "identity"), ("User bought a house on a busy street", "other"),
      ("User bought a house with ten acres", "other")]),
]
